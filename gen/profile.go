package gen

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/gen/internal/stricttoml"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Profile is a build target's capability profile (kiln build --profile):
// which capability families a binary for that target may link. An
// air-gapped target, for example, allows no network family.
//
//	name  = "airgapped"
//	allow = ["control", "data", "fs", "env"]   # or: deny = ["httpclient", "llm"]
type Profile struct {
	Name  string   `toml:"name"`
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`

	File string `toml:"-"` // where it was read from
}

// LoadProfile reads a profile file strictly.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return DecodeProfile(path, data)
}

// DecodeProfile strictly decodes a profile: unknown keys, unknown family
// ids, both or neither of allow and deny, and denying the always-linked
// control family are errors naming the file (and line for syntax errors
// and unknown keys).
func DecodeProfile(name string, data []byte) (*Profile, error) {
	var p Profile
	md, err := stricttoml.Decode(name, data, &p)
	if err != nil {
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("%s:%d: unknown key %q (a profile has name, allow and deny)", name, stricttoml.Line(data, und[0]), und[0].String())
	}
	p.File = name
	if p.Name == "" {
		p.Name = name
	}
	switch {
	case md.IsDefined("allow") && md.IsDefined("deny"):
		return nil, fmt.Errorf("%s: give allow or deny, not both", name)
	case !md.IsDefined("allow") && !md.IsDefined("deny"):
		return nil, fmt.Errorf("%s: a profile needs allow = [families] or deny = [families]", name)
	}
	for _, list := range [][]string{p.Allow, p.Deny} {
		if _, err := catalog.Sort(list); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	for _, id := range p.Deny {
		if f, _ := catalog.Lookup(id); f.Always {
			return nil, fmt.Errorf("%s: family %q cannot be denied: every binary links it", name, id)
		}
	}
	return &p, nil
}

// Allows reports whether the profile lets a binary link family id. The
// always-linked families (control) are allowed by every profile.
func (p *Profile) Allows(id string) bool {
	if p == nil {
		return true
	}
	if f, ok := catalog.Lookup(id); ok && f.Always {
		return true
	}
	if p.Deny != nil {
		return !slices.Contains(p.Deny, id)
	}
	return slices.Contains(p.Allow, id)
}

// CapabilityError refuses a build: the workflow needs a capability family
// the profile forbids (and --degrade was not given). Its JSON form is the
// error envelope `kiln build` prints on stderr.
type CapabilityError struct {
	Code               string   // unsupported_capability (OpenWOP's refusal code)
	Workflow           string   // root workflow name
	Profile            string   // profile name
	RequiredCapability string   // the first unmet capability key
	Required           []string // every unmet capability key, sorted
	Families           []string // the forbidden families the workflow needs, catalog order
	Why                []string // what needs them, e.g. "node fetch (http_request)"
}

func (e *CapabilityError) Error() string {
	return fmt.Sprintf("workflow %q needs capability families %s, which profile %q forbids (needed by %s); build with --degrade to leave them out",
		e.Workflow, strings.Join(e.Families, ", "), e.Profile, strings.Join(e.Why, "; "))
}

// Envelope is the error as JSON: {"error": {"code", "message", "details"}}.
func (e *CapabilityError) Envelope() map[string]any {
	return map[string]any{"error": map[string]any{
		"code":    e.Code,
		"message": e.Error(),
		"details": map[string]any{
			"requiredCapability":   e.RequiredCapability,
			"requiredCapabilities": e.Required,
			"families":             e.Families,
			"profile":              e.Profile,
			"workflow":             e.Workflow,
		},
	}}
}

// projection is what a profile leaves of a workflow's capabilities.
type projection struct {
	Families   []string // families to link, catalog order
	Degraded   []string // capability keys the binary will not provide, sorted
	Unprovided []string // node kinds left without a handler, sorted
}

// project resolves the families a workflow tree needs (those its nodes,
// triggers, routes and secrets use, plus the families providing its
// requires_capabilities keys) against a profile. A needed family the
// profile forbids refuses the build, or with degrade is left out: its keys
// and any required key no family provides become degraded[], and its node
// kinds fail at dispatch with capability_not_provided.
func project(wf *workflow.Workflow, u *catalog.Usage, p *Profile, degrade bool) (*projection, error) {
	needed := append([]string{}, u.Families...)
	why := map[string][]string{}
	for id, reasons := range u.Why {
		why[id] = reasons
	}
	requiredKeys := requiredKeys(wf)
	degraded := map[string]bool{}
	for _, key := range requiredKeys {
		id, ok := catalog.FamilyOfKey(key)
		if !ok {
			degraded[key] = true // no kiln family provides it: visible, never silent
			continue
		}
		needed = append(needed, id)
		why[id] = append(why[id], "requires_capabilities "+key)
	}
	needed, err := catalog.Sort(needed)
	if err != nil {
		return nil, err
	}
	var linked, denied []string
	for _, id := range needed {
		if p.Allows(id) {
			linked = append(linked, id)
		} else {
			denied = append(denied, id)
		}
	}
	if len(denied) > 0 {
		var keys, reasons []string
		for _, id := range denied {
			f, _ := catalog.Lookup(id)
			keys = append(keys, f.Keys...)
			for _, r := range why[id] {
				reasons = append(reasons, r+" ["+id+"]")
			}
		}
		sort.Strings(keys)
		if !degrade {
			return nil, &CapabilityError{Code: "unsupported_capability", Workflow: wf.Name, Profile: p.Name,
				RequiredCapability: firstRequired(requiredKeys, keys), Required: keys, Families: denied, Why: reasons}
		}
		for _, k := range keys {
			degraded[k] = true
		}
	}
	unprovided := map[string]bool{}
	for _, kind := range u.NodeKinds {
		if id, _ := catalog.FamilyOfKind(kind); !slices.Contains(linked, id) {
			unprovided[kind] = true
		}
	}
	// An agent loop whose tool lost its family cannot run as declared.
	for _, w := range workflow.Tree(wf) {
		for _, n := range w.Nodes {
			for _, tool := range n.Tools {
				if id, _ := catalog.FamilyOfKind(tool); !slices.Contains(linked, id) {
					unprovided[n.Type] = true
				}
			}
		}
	}
	return &projection{Families: linked, Degraded: setSorted(degraded), Unprovided: setSorted(unprovided)}, nil
}

// requiredKeys are the requires_capabilities keys of the tree, sorted.
func requiredKeys(wf *workflow.Workflow) []string {
	set := map[string]bool{}
	for _, w := range workflow.Tree(wf) {
		for _, k := range w.RequiresCapabilities {
			set[k] = true
		}
	}
	return setSorted(set)
}

// firstRequired prefers a key the workflow declared itself, in the form it
// declared it (a catalog key or its OpenWOP identifier).
func firstRequired(declared, unmet []string) string {
	for _, k := range declared {
		if slices.Contains(unmet, k) || slices.Contains(catalog.WireKeys(unmet), k) {
			return k
		}
	}
	if len(unmet) > 0 {
		return unmet[0]
	}
	return ""
}

func setSorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
