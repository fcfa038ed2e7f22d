package supply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// WriteArtifacts writes the sidecars of a freshly built binary bin whose
// embedded manifest JSON is embedded: BIN.manifest.json (the embedded
// manifest plus the binary's digest and the modules its build info lists),
// the CycloneDX SBOM BIN.cdx.json and the provenance BIN.intoto.json. All
// three are deterministic. Signatures left from an earlier build at the same
// path are removed. It returns the manifest written.
func WriteArtifacts(bin string, embedded []byte) (*manifest.Manifest, error) {
	m, err := manifest.Decode(embedded)
	if err != nil {
		return nil, err
	}
	facts, err := ReadBuildFacts(bin)
	if err != nil {
		return nil, err
	}
	sum, err := FileSHA256(bin)
	if err != nil {
		return nil, err
	}
	if m.GoVersion == "" {
		m.GoVersion = facts.GoVersion
	}
	main := facts.Main
	m.MainModule, m.Modules, m.BinarySHA256 = &main, facts.Modules, sum

	mdata, err := manifest.Encode(m)
	if err != nil {
		return nil, err
	}
	sbom, err := SBOM(bin, sum, facts, m.KilnVersion)
	if err != nil {
		return nil, err
	}
	prov, err := Provenance(bin, sum, facts, ProvenanceInfo{Workflow: m.Workflow.Name, Inputs: m.Inputs, KilnVersion: m.KilnVersion})
	if err != nil {
		return nil, err
	}
	// Signatures of an earlier build at this path would no longer match.
	for _, f := range append([]string{bin}, Sidecars(bin)...) {
		for _, sig := range []string{f + SigSuffix, f + BundleSuffix} {
			if err := os.Remove(sig); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	for suffix, data := range map[string][]byte{ManifestSuffix: mdata, SBOMSuffix: sbom, ProvenanceSuffix: prov} {
		if err := runtime.WriteFileAtomic(bin+suffix, data, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", bin+suffix, err)
		}
	}
	return m, nil
}
