package gen

import (
	"fmt"
	"sort"

	"github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// planNeeds computes the plan's effective needs from kiln's built-in
// catalog followed by the user's catalogs, for the families the binary
// links, and records them in the manifest: the digest of their canonical
// JSON, and each user catalog as an input of kind "needs".
func planNeeds(p *Plan, user []*needs.Catalog) error {
	cats := append([]*needs.Catalog{needs.Builtin()}, user...)
	eff, err := needs.Compute(needs.Input{Workflow: p.Workflow, Families: p.Families, Catalogs: cats})
	if err != nil {
		return err
	}
	canon, err := eff.Canonical()
	if err != nil {
		return fmt.Errorf("effective needs: %w", err)
	}
	digest, err := eff.Digest()
	if err != nil {
		return fmt.Errorf("effective needs: %w", err)
	}
	p.Needs, p.NeedsJSON = eff, canon
	p.Manifest.EffectiveNeedsSHA256 = digest
	p.Manifest.Degraded = p.Degraded
	rootDir := absDir(p.Workflow.Source)
	for _, c := range user {
		in := manifest.Input{Path: relPath(rootDir, c.File), Kind: "needs", SHA256: c.SHA256}
		if !containsInput(p.Inputs, in) {
			p.Inputs = append(p.Inputs, in)
		}
	}
	sort.SliceStable(p.Inputs, func(i, j int) bool {
		if (p.Inputs[i].Kind == "workflow") != (p.Inputs[j].Kind == "workflow") {
			return p.Inputs[i].Kind == "workflow"
		}
		if p.Inputs[i].Path != p.Inputs[j].Path {
			return p.Inputs[i].Path < p.Inputs[j].Path
		}
		return p.Inputs[i].Kind < p.Inputs[j].Kind
	})
	p.Manifest.Inputs = p.Inputs
	return nil
}

func containsInput(list []manifest.Input, in manifest.Input) bool {
	for _, x := range list {
		if x == in {
			return true
		}
	}
	return false
}
