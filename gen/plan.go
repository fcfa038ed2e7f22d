package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/manifest"
	rneeds "github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Plan is what the generator derives from a validated workflow tree: the
// capability families to link, the input files and the manifest. Emit and
// Build both work from one Plan.
type Plan struct {
	Workflow *workflow.Workflow
	Usage    *catalog.Usage
	Families []string // catalog order
	Inputs   []manifest.Input
	Manifest *manifest.Manifest
	// Needs are the effective needs (plan_needs.go); NeedsJSON their
	// canonical JSON, embedded in the binary.
	Needs     *rneeds.Effective
	NeedsJSON []byte
	// Degraded lists the capability keys the binary will not provide and
	// Unprovided the node kinds left without a handler (profile.go).
	Degraded   []string
	Unprovided []string
}

// PlanOptions tunes NewPlan.
type PlanOptions struct {
	// KilnVersion is recorded in the manifest ("" = this kiln's version).
	KilnVersion string
	// GoVersion is the toolchain that will build the program ("" = not
	// known yet: `kiln gen` leaves it to the binary).
	GoVersion string
	// Catalogs are --needs catalogs, after kiln's built-in one.
	Catalogs []*needs.Catalog
	// Profile limits the families the binary may link (nil = all);
	// Degrade builds without forbidden ones instead of refusing.
	Profile *Profile
	Degrade bool
}

// NewPlan resolves the capability families of wf (validated, children
// loaded) and builds its manifest.
func NewPlan(wf *workflow.Workflow, opts PlanOptions) (*Plan, error) {
	if wf == nil {
		return nil, fmt.Errorf("plan: no workflow")
	}
	u, err := catalog.Used(wf)
	if err != nil {
		return nil, fmt.Errorf("workflow %q: %w", wf.Name, err)
	}
	proj, err := project(wf, u, opts.Profile, opts.Degrade) // profile.go
	if err != nil {
		return nil, err
	}
	inputs, err := planInputs(wf)
	if err != nil {
		return nil, err
	}
	kv := opts.KilnVersion
	if kv == "" {
		kv = manifest.KilnVersion()
	}
	m := &manifest.Manifest{
		Schema:         manifest.Schema,
		Workflow:       manifest.Workflow{Name: wf.Name, Digest: wf.Digest},
		KilnVersion:    kv,
		GoVersion:      opts.GoVersion,
		BuildTags:      []string{}, // the generated imports prune; no build tags
		NodeKinds:      u.NodeKinds,
		Triggers:       u.Triggers,
		AuthKinds:      u.AuthKinds,
		CapabilityKeys: catalog.KeysOf(proj.Families),
		Inputs:         inputs,
	}
	if m.TablesSHA256, err = manifest.TablesDigest(wf); err != nil {
		return nil, err
	}
	for _, id := range proj.Families {
		f, _ := catalog.Lookup(id)
		m.Families = append(m.Families, manifest.Family{ID: f.ID, Package: f.Package, Tag: f.Tag, Keys: f.Keys})
	}
	p := &Plan{Workflow: wf, Usage: u, Families: proj.Families, Inputs: inputs, Manifest: m,
		Degraded: proj.Degraded, Unprovided: proj.Unprovided}
	if err := planNeeds(p, opts.Catalogs); err != nil { // plan_needs.go
		return nil, err
	}
	return p, nil
}

// planInputs lists the workflow's source files and declared assets with
// their digests. Paths are relative to the root workflow's directory (slash
// separated) so the manifest does not depend on where the tree lives.
func planInputs(root *workflow.Workflow) ([]manifest.Input, error) {
	if root.Digest == "" {
		return nil, fmt.Errorf("workflow %q has no source digest (not loaded with gen.Load?)", root.Name)
	}
	rootDir := absDir(root.Source)
	var out []manifest.Input
	seen := map[string]bool{}
	add := func(in manifest.Input) {
		k := in.Kind + "\x00" + in.Path + "\x00" + in.SHA256
		if !seen[k] {
			seen[k] = true
			out = append(out, in)
		}
	}
	for _, w := range workflow.Tree(root) {
		kind := "child"
		if w == root {
			kind = "workflow"
		}
		add(manifest.Input{Path: relPath(rootDir, w.Source), Kind: kind, SHA256: w.Digest})
		dir := relPath(rootDir, filepath.Dir(absFile(w.Source)))
		kinds := assetKinds(w)
		for _, p := range runtime.SortedKeys(w.Assets) {
			sum := sha256.Sum256(w.Assets[p])
			rel := filepath.ToSlash(p)
			if !filepath.IsAbs(p) {
				rel = path.Clean(path.Join(dir, rel))
			}
			add(manifest.Input{Path: rel, Kind: kinds[p], SHA256: hex.EncodeToString(sum[:])})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Kind == "workflow") != (out[j].Kind == "workflow") {
			return out[i].Kind == "workflow"
		}
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Kind < out[j].Kind
	})
	return out, nil
}

// assetKinds says what each declared asset path of wf is used as.
func assetKinds(wf *workflow.Workflow) map[string]string {
	k := map[string]string{}
	set := func(p, kind string) {
		if p != "" && k[p] == "" {
			k[p] = kind
		}
	}
	for _, n := range wf.Nodes {
		set(n.OutputSchema, "schema")
		set(n.PromptFile, "prompt")
	}
	for _, r := range wf.HTTPRoutes {
		set(r.InputSchema, "schema")
	}
	if wf.Auth != nil {
		for _, name := range runtime.SortedKeys(wf.Auth.OIDC) {
			set(wf.Auth.OIDC[name].JWKSFile, "jwks")
		}
	}
	if wf.Policy != nil && wf.Policy.Rego != nil {
		set(wf.Policy.Rego.File, "policy") // [policy.rego]
	}
	for p := range wf.Assets {
		set(p, "asset")
	}
	return k
}

func absFile(p string) string {
	if p == "" {
		return ""
	}
	return absOf(p)
}

func absDir(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Dir(absOf(p))
}

// relPath is p relative to dir with forward slashes; p itself (cleaned)
// when it is not below dir or either is unknown.
func relPath(dir, p string) string {
	if p == "" {
		return ""
	}
	if dir != "" {
		if r, err := filepath.Rel(dir, absOf(p)); err == nil {
			return filepath.ToSlash(r)
		}
	}
	return filepath.ToSlash(filepath.Clean(p))
}

// sanitizeName turns a workflow name into a safe identifier-ish word for
// module paths and file names.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == '_' || r == '.' || r == ' ':
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "workflow"
	}
	return out
}

// absOf is p made absolute (cleaned p when that fails).
func absOf(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}
