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
	docs, m, err := artifactDocs(bin, embedded)
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
	for _, suffix := range sidecarSuffixes {
		if err := runtime.WriteFileAtomic(bin+suffix, docs[suffix], 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", bin+suffix, err)
		}
	}
	return m, nil
}

var sidecarSuffixes = []string{ManifestSuffix, SBOMSuffix, ProvenanceSuffix}

// CompleteArtifacts writes the sidecars of bin that are missing (a binary
// built by go build from generated code has none), from what the binary
// itself embeds (its manifest) and links (its build info), exactly as kiln
// build would have written them. Sidecars that exist are left as they are:
// signing and verification then say whether they fit. It returns the files
// written.
func CompleteArtifacts(bin string) ([]string, error) {
	var missing []string
	for _, suffix := range sidecarSuffixes {
		if _, err := os.Lstat(bin + suffix); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, suffix)
		} else if err != nil {
			return nil, err
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	embedded, err := manifest.Find(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v (only a program kiln generated can get its manifest, SBOM and provenance from itself)", bin, err)
	}
	docs, _, err := artifactDocs(bin, embedded)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, suffix := range missing {
		if err := runtime.WriteFileAtomic(bin+suffix, docs[suffix], 0o644); err != nil {
			return written, fmt.Errorf("write %s: %w", bin+suffix, err)
		}
		written = append(written, bin+suffix)
	}
	return written, nil
}

// artifactDocs renders the three sidecars of bin, by suffix.
func artifactDocs(bin string, embedded []byte) (map[string][]byte, *manifest.Manifest, error) {
	m, err := manifest.Decode(embedded)
	if err != nil {
		return nil, nil, err
	}
	facts, err := ReadBuildFacts(bin)
	if err != nil {
		return nil, nil, err
	}
	sum, err := FileSHA256(bin)
	if err != nil {
		return nil, nil, err
	}
	if m.GoVersion == "" {
		m.GoVersion = facts.GoVersion
	}
	main := facts.Main
	m.MainModule, m.Modules, m.BinarySHA256 = &main, facts.Modules, sum

	mdata, err := manifest.Encode(m)
	if err != nil {
		return nil, nil, err
	}
	docFacts := withKilnSum(facts, m.KilnSum)
	sbom, err := SBOM(bin, sum, docFacts, Tool{Version: m.KilnVersion, Sum: m.KilnSum})
	if err != nil {
		return nil, nil, err
	}
	prov, err := Provenance(bin, sum, docFacts, ProvenanceInfo{Workflow: m.Workflow.Name, Inputs: m.Inputs, KilnVersion: m.KilnVersion, KilnSum: m.KilnSum})
	if err != nil {
		return nil, nil, err
	}
	return map[string][]byte{ManifestSuffix: mdata, SBOMSuffix: sbom, ProvenanceSuffix: prov}, m, nil
}

// withKilnSum gives the kiln module of facts the sum kiln's identity
// names when the build info has none (kiln reached through a directory
// replace): the SBOM and provenance then carry a digest for it. The
// manifest keeps the build info's own modules, which verify compares.
func withKilnSum(facts *BuildFacts, sum string) *BuildFacts {
	if sum == "" {
		return facts
	}
	c := *facts
	c.Modules = append([]Module(nil), facts.Modules...)
	for i, m := range c.Modules {
		if m.Path == manifest.ModulePath && m.Sum == "" {
			c.Modules[i].Sum = sum
		}
	}
	return &c
}
