package needs

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime"
	rneeds "github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Input is what Compute needs to know about a workflow.
type Input struct {
	Workflow *workflow.Workflow
	// Families are the capability families the workflow uses (children
	// included), from the capability catalog.
	Families []string
	// Catalogs in order: kiln's built-in catalog first, then --needs files.
	Catalogs []*Catalog
}

// ConflictError is a need two classes ask for incompatibly.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return "needs conflict: " + e.Msg }

// Classes lists the classes a workflow uses, sorted: workflow:<name>,
// node:<kind> for every node kind, family:<id>, intelligence:<provider>
// for every backend provider, mcp:<name> for every MCP server. Children are
// included.
func Classes(wf *workflow.Workflow, families []string) []string {
	set := map[string]bool{"workflow:" + wf.Name: true}
	for _, f := range families {
		set["family:"+f] = true
	}
	for _, w := range workflow.Tree(wf) {
		for _, n := range w.Nodes {
			set["node:"+n.Type] = true
		}
		if w.Intelligence != nil {
			for _, b := range w.Intelligence.Backends {
				set["intelligence:"+b.Provider] = true
			}
		}
		for _, s := range w.MCPServers {
			set["mcp:"+s.Name] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// ask is one class asking for one need.
type ask struct {
	class    string
	conflict string // "broader" when the asking catalog/entry allows it
	need     rneeds.Need
	// ungoverned marks access kiln itself performs outside the workflow's
	// [policy] (intelligence and MCP endpoints, secret files, OAuth2 token
	// hosts): the policy is no ceiling for it.
	ungoverned bool
}

// Compute returns the effective needs: every class's needs merged and
// deduplicated (secret by key, oauth by provider + scope set, capability by
// type, network by host, filesystem by path + mode) with provenance.
// Conflicts fail closed unless the catalog says conflict = "broader".
func Compute(in Input) (*rneeds.Effective, error) {
	wf := in.Workflow
	classes := Classes(wf, in.Families)
	used := map[string]bool{}
	for _, c := range classes {
		used[c] = true
	}
	var asks []ask
	for _, cat := range in.Catalogs {
		for _, list := range [][]Entry{cat.AgentNeeds, cat.DependencyNeeds} {
			for _, e := range list {
				if !used[e.ClassName] {
					continue
				}
				conflict := cat.Conflict
				if e.Conflict != "" {
					conflict = e.Conflict
				}
				for _, n := range expand(e.Needs) {
					asks = append(asks, ask{class: e.ClassName, conflict: conflict, need: n, ungoverned: ungovernedClass(e.ClassName)})
				}
			}
		}
	}
	asks = rewriteProviderNeeds(wf, asks)
	for _, d := range derived(wf, in.Families) {
		asks = append(asks, ask{class: d.need.Sources[0], need: d.need, ungoverned: d.ungoverned})
	}
	merged, err := merge(asks)
	if err != nil {
		return nil, err
	}
	eff := &rneeds.Effective{Workflow: wf.Name, Needs: merged}
	ceiling(wf.Policy, eff, governed(asks))
	eff.Sort()
	return eff, nil
}

// expand flattens one entry's needs into individual needs with ids.
func expand(n Needs) []rneeds.Need {
	var out []rneeds.Need
	for _, s := range n.Secrets {
		out = append(out, secretNeed(s.Key, s.Label, s.Optional))
	}
	for _, o := range n.OAuth {
		scopes := append([]string(nil), o.Scopes...)
		sort.Strings(scopes)
		scopes = uniq(scopes)
		out = append(out, rneeds.Need{ID: "oauth:" + o.Provider + ":" + strings.Join(scopes, ","), Kind: rneeds.KindOAuth,
			Label: o.Label, Optional: o.Optional, Provider: o.Provider, Scopes: scopes})
	}
	for _, c := range n.Capabilities {
		out = append(out, rneeds.Need{ID: "capability:" + c.Type, Kind: rneeds.KindCapability, Label: c.Label, Optional: c.Optional, Type: c.Type})
	}
	if n.Network != nil {
		for _, h := range n.Network.Allow {
			out = append(out, networkNeed(h, n.Network.Optional))
		}
	}
	if n.Filesystem != nil {
		for _, p := range n.Filesystem.Allow {
			out = append(out, fsNeed(p.Path, p.Mode, p.Label, n.Filesystem.Optional))
		}
	}
	return out
}

func secretNeed(key, label string, optional bool) rneeds.Need {
	return rneeds.Need{ID: "secret:" + key, Kind: rneeds.KindSecret, Label: label, Optional: optional, Key: key}
}

func networkNeed(host string, optional bool) rneeds.Need {
	h := strings.ToLower(host)
	return rneeds.Need{ID: "network:" + h, Kind: rneeds.KindNetwork, Optional: optional, Host: h}
}

func fsNeed(path, mode, label string, optional bool) rneeds.Need {
	return rneeds.Need{ID: "filesystem:" + path + ":" + mode, Kind: rneeds.KindFilesystem, Label: label, Optional: optional, Path: path, Mode: mode}
}

// rewriteProviderNeeds applies a backend's own api_key_env and base_url to
// the built-in provider needs: a backend that reads its key from MY_KEY
// needs MY_KEY, not the provider's conventional variable.
func rewriteProviderNeeds(wf *workflow.Workflow, asks []ask) []ask {
	type override struct{ key, host string }
	byProvider := map[string][]override{}
	for _, w := range workflow.Tree(wf) {
		if w.Intelligence == nil {
			continue
		}
		for _, b := range w.Intelligence.Backends {
			o := override{key: b.APIKeyEnv}
			if u, err := url.Parse(b.BaseURL); err == nil && u.Host != "" {
				o.host = u.Hostname()
			}
			byProvider[b.Provider] = append(byProvider[b.Provider], o)
		}
	}
	var out []ask
	for _, a := range asks {
		provider, ok := strings.CutPrefix(a.class, "intelligence:")
		overrides := byProvider[provider]
		if !ok || len(overrides) == 0 {
			out = append(out, a)
			continue
		}
		for _, o := range overrides {
			b := a
			switch {
			case a.need.Kind == rneeds.KindSecret && o.key != "":
				b.need = secretNeed(o.key, a.need.Label, a.need.Optional)
			case a.need.Kind == rneeds.KindNetwork && o.host != "":
				b.need = networkNeed(o.host, a.need.Optional)
			}
			out = append(out, b)
		}
	}
	return out
}

// ungovernedClass: intelligence providers and MCP servers are reached by
// kiln itself, not through the http client the [policy] governs.
func ungovernedClass(class string) bool {
	return strings.HasPrefix(class, "intelligence:") || strings.HasPrefix(class, "mcp:")
}

// governed lists, by kind and target (host or path, any mode), the needs
// at least one class asked for through a policy-governed capability.
func governed(asks []ask) map[string]bool {
	out := map[string]bool{}
	for _, a := range asks {
		if !a.ungoverned {
			out[a.need.Kind+"\x00"+a.need.Host+a.need.Path] = true
		}
	}
	return out
}

type derivedNeed struct {
	need       rneeds.Need
	ungoverned bool
}

// derived are the needs the workflow tree itself states, as each linked
// family declares them (capabilities/<family>/spec): auth binding secrets,
// [[secrets]] sources, MCP servers, openai-compatible backends, the
// [logging.otel] collector, and the hosts and paths the policy opens.
func derived(wf *workflow.Workflow, families []string) []derivedNeed {
	var out []derivedNeed
	for _, w := range workflow.Tree(wf) {
		for _, f := range all.Families() {
			if f.Needs == nil || (f.NeedsIfLinked && !slices.Contains(families, f.ID)) {
				continue
			}
			for _, n := range f.Needs(w) {
				class := n.Class
				if class == "" {
					class = "workflow:" + w.Name
				}
				need := rneedOf(n)
				need.Sources = []string{class}
				out = append(out, derivedNeed{need: need, ungoverned: n.Ungoverned || ungovernedClass(class)})
			}
		}
	}
	return out
}

// rneedOf is a family's need with its id.
func rneedOf(n spec.Need) rneeds.Need {
	switch n.Kind {
	case spec.NeedSecret:
		return secretNeed(n.Key, n.Label, false)
	case spec.NeedNetwork:
		return networkNeed(n.Host, false)
	}
	return fsNeed(n.Path, n.Mode, n.Label, false)
}

// merge deduplicates asks by need id, keeping provenance, and fails on a
// filesystem path asked both ro and rw unless every asking class allows
// the broader mode.
func merge(asks []ask) ([]rneeds.Need, error) {
	byID := map[string]*rneeds.Need{}
	var order []string
	fsModes := map[string][]ask{} // path -> asks
	for _, a := range asks {
		n := a.need
		if n.Kind == rneeds.KindFilesystem {
			fsModes[n.Path] = append(fsModes[n.Path], a)
		}
		cur, ok := byID[n.ID]
		if !ok {
			c := n
			c.Sources = []string{a.class}
			byID[n.ID] = &c
			order = append(order, n.ID)
			continue
		}
		cur.Sources = uniq(append(cur.Sources, a.class))
		cur.Optional = cur.Optional && n.Optional // mandatory wins: fail closed
		if cur.Label == "" {
			cur.Label = n.Label
		}
	}
	for _, path := range runtime.SortedKeys(fsModes) {
		list := fsModes[path]
		var ro, rw []string
		broader := true
		for _, a := range list {
			if a.need.Mode == "ro" {
				ro = append(ro, a.class)
			} else {
				rw = append(rw, a.class)
			}
			if a.conflict != "broader" && !strings.HasPrefix(a.class, "workflow:") {
				broader = false
			}
		}
		if len(ro) == 0 || len(rw) == 0 {
			continue
		}
		if !broader {
			return nil, &ConflictError{Msg: fmt.Sprintf("path %s is asked read-only by %s and read-write by %s; state conflict = \"broader\" in the catalog to grant read-write",
				path, strings.Join(uniq(sorted(ro)), ", "), strings.Join(uniq(sorted(rw)), ", "))}
		}
		// Broader: the rw need absorbs the ro one and its provenance.
		roID, rwID := "filesystem:"+path+":ro", "filesystem:"+path+":rw"
		byID[rwID].Sources = uniq(sorted(append(byID[rwID].Sources, byID[roID].Sources...)))
		byID[rwID].Optional = byID[rwID].Optional && byID[roID].Optional
		delete(byID, roID)
	}
	out := make([]rneeds.Need, 0, len(byID))
	for _, id := range order {
		if n, ok := byID[id]; ok {
			sort.Strings(n.Sources)
			out = append(out, *n)
		}
	}
	return out, nil
}

// ceiling marks needs the workflow's own [policy] does not allow: the
// policy is the ceiling, so they can never be met as written. Needs only
// asked for access the policy does not govern (see ask.ungoverned) are
// left alone.
func ceiling(p *workflow.Policy, eff *rneeds.Effective, governed map[string]bool) {
	if p == nil {
		return
	}
	for i := range eff.Needs {
		n := &eff.Needs[i]
		if !governed[n.Kind+"\x00"+n.Host+n.Path] {
			continue
		}
		switch n.Kind {
		case rneeds.KindNetwork:
			// Intelligence providers are reached by the llm family, which
			// [policy.http] does not govern; only other hosts are capped.
			if onlyIntelligence(n.Sources) {
				continue
			}
			if !hostAllowed(p, n.Host) {
				n.BeyondPolicy = "host " + n.Host + " is not in policy.http.urls"
			}
		case rneeds.KindFilesystem:
			var list []string
			if p.FS != nil {
				list = p.FS.Write
				if n.Mode == "ro" {
					list = append(append([]string(nil), p.FS.Read...), p.FS.Write...)
				}
			}
			ok := false
			for _, pat := range list {
				if policy.Match(pat, n.Path) {
					ok = true
				}
			}
			if !ok {
				field := "policy.fs.write"
				if n.Mode == "ro" {
					field = "policy.fs.read"
				}
				n.BeyondPolicy = "path " + n.Path + " is not in " + field
			}
		}
	}
}

func hostAllowed(p *workflow.Policy, host string) bool {
	if p.HTTP == nil {
		return false
	}
	for _, pat := range p.HTTP.URLs {
		if pat == "*" {
			return true
		}
		if h := rules.PatternHost(pat); strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

func sorted(s []string) []string { sort.Strings(s); return s }

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func onlyIntelligence(sources []string) bool {
	for _, s := range sources {
		if !strings.HasPrefix(s, "intelligence:") {
			return false
		}
	}
	return len(sources) > 0
}
