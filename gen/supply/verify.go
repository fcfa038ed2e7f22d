package supply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kilnworks/kiln/runtime/manifest"
)

// Check is one verification step: what was checked (the file it concerns
// and a short name) and its error, nil when it passed.
type Check struct {
	File string
	Name string
	Err  error
}

// Report lists every check Verify ran.
type Report struct {
	Checks []Check
}

// OK reports whether every check passed.
func (r *Report) OK() bool { return r.Err() == nil }

// Err returns the first failed check as an error naming its file and step.
func (r *Report) Err() error {
	for _, c := range r.Checks {
		if c.Err != nil {
			return fmt.Errorf("%s: %s: %w", c.File, c.Name, c.Err)
		}
	}
	return nil
}

// Write prints one line per check.
func (r *Report) Write(w io.Writer) {
	for _, c := range r.Checks {
		if c.Err != nil {
			fmt.Fprintf(w, "FAIL %s: %s: %v\n", c.File, c.Name, c.Err)
		} else {
			fmt.Fprintf(w, "ok   %s: %s\n", c.File, c.Name)
		}
	}
}

// Verify checks a sealed binary and its sidecars, offline:
//   - the signatures of the binary and the manifest (both required), and of
//     the SBOM and provenance when they exist;
//   - that the manifest's binary_sha256 is the binary's digest;
//   - that the build info inside the binary (Go version, tags, modules)
//     matches the manifest, and that the manifest embedded in the binary is
//     the one beside it less the build-only fields;
//   - that the SBOM and the provenance name this binary's digest.
//
// Every step runs, so the report shows all that is wrong at once.
func Verify(bin string, v signature.Verifier) *Report {
	r := &Report{}
	add := func(file, name string, err error) { r.Checks = append(r.Checks, Check{filepath.Base(file), name, err}) }

	binSHA, err := FileSHA256(bin)
	if err != nil {
		add(bin, "read", err)
		return r
	}
	add(bin, "signature", VerifyFile(v, bin))

	mpath := bin + ManifestSuffix
	if exists(mpath) {
		add(mpath, "signature", VerifyFile(v, mpath))
		checkManifest(bin, binSHA, add)
	} else {
		add(mpath, "present", errors.New("missing: kiln build writes it beside the binary, and verification needs it"))
	}

	sbom := bin + SBOMSuffix
	if exists(sbom) {
		add(sbom, "signature", VerifyFile(v, sbom))
		var doc cdxBOM
		if err := readJSON(sbom, &doc); err != nil {
			add(sbom, "read", err)
		} else {
			got := ""
			for _, h := range doc.Metadata.Component.Hashes {
				if h.Alg == "SHA-256" {
					got = h.Content
				}
			}
			add(sbom, "binary digest", matchDigest("metadata.component SHA-256", got, binSHA, bin))
		}
	}

	prov := bin + ProvenanceSuffix
	if exists(prov) {
		add(prov, "signature", VerifyFile(v, prov))
		var st statement
		if err := readJSON(prov, &st); err != nil {
			add(prov, "read", err)
		} else if len(st.Subject) != 1 {
			add(prov, "binary digest", fmt.Errorf("want exactly one subject, found %d", len(st.Subject)))
		} else {
			add(prov, "binary digest", matchDigest("subject sha256", st.Subject[0].Digest["sha256"], binSHA, bin))
		}
	}
	return r
}

// checkManifest compares the manifest with the binary: its digest, the
// build info the Go linker embedded, and the manifest the binary embeds.
func checkManifest(bin, binSHA string, add func(file, name string, err error)) {
	path := bin + ManifestSuffix
	data, err := os.ReadFile(path)
	if err != nil {
		add(path, "read", err)
		return
	}
	m, err := manifest.Decode(data)
	if err != nil {
		add(path, "read", err)
		return
	}
	add(path, "binary digest", matchDigest("binary_sha256", m.BinarySHA256, binSHA, bin))
	facts, err := ReadBuildFacts(bin)
	if err != nil {
		add(bin, "build info", err)
	} else {
		add(bin, "build info matches manifest", compareFacts(m, facts))
	}
	add(bin, "embedded manifest matches", compareEmbedded(bin, m))
}

// compareEmbedded checks that the manifest beside the binary is the one
// inside it plus the facts of the finished build.
func compareEmbedded(bin string, beside *manifest.Manifest) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	raw, err := manifest.Find(data)
	if err != nil {
		return err
	}
	inside, err := manifest.Decode(raw)
	if err != nil {
		return fmt.Errorf("embedded: %v", err)
	}
	want := *beside
	want.MainModule, want.Modules, want.BinarySHA256 = nil, nil, ""
	if inside.GoVersion == "" {
		want.GoVersion = ""
	}
	if !reflect.DeepEqual(&want, inside) {
		return fmt.Errorf("the manifest beside the binary differs from the one embedded in it (%s)", firstDiff(&want, inside))
	}
	return nil
}

// firstDiff names the first top-level manifest field that differs.
func firstDiff(a, b *manifest.Manifest) string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			tag, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
			return "field " + tag
		}
	}
	return "no field"
}

func matchDigest(field, recorded, actual, bin string) error {
	if recorded == "" {
		return fmt.Errorf("%s is missing", field)
	}
	if !strings.EqualFold(recorded, actual) {
		return fmt.Errorf("%s %s does not match %s (sha256 %s)", field, recorded, filepath.Base(bin), actual)
	}
	return nil
}

// compareFacts reports the first disagreement between the manifest and
// the build info read from the binary.
func compareFacts(m *manifest.Manifest, f *BuildFacts) error {
	if m.GoVersion != f.GoVersion {
		return fmt.Errorf("Go version: manifest says %q, binary was built with %q", m.GoVersion, f.GoVersion)
	}
	// A plain go build of generated code has no tags: its imports prune it
	// (kiln inspect proves that from what it links). Any kiln tag must be
	// exactly the manifest's.
	if hasKilnTag(f.Tags) && !slices.Equal(sorted(m.BuildTags), sorted(f.Tags)) {
		return fmt.Errorf("build tags: manifest says %q, binary has %q", strings.Join(m.BuildTags, ","), strings.Join(f.Tags, ","))
	}
	if m.MainModule != nil && *m.MainModule != f.Main {
		return fmt.Errorf("main module: manifest says %s %s, binary has %s %s", m.MainModule.Path, m.MainModule.Version, f.Main.Path, f.Main.Version)
	}
	want := map[string]Module{}
	for _, mod := range m.Modules {
		want[mod.Path] = mod
	}
	for _, mod := range f.Modules {
		w, ok := want[mod.Path]
		switch {
		case !ok:
			return fmt.Errorf("module %s %s is linked into the binary but not in the manifest", mod.Path, mod.Version)
		case w != mod:
			return fmt.Errorf("module %s: manifest says %s %s, binary has %s %s", mod.Path, w.Version, w.Sum, mod.Version, mod.Sum)
		}
		delete(want, mod.Path)
	}
	for _, mod := range m.Modules {
		if _, left := want[mod.Path]; left {
			return fmt.Errorf("module %s %s is in the manifest but not linked into the binary", mod.Path, mod.Version)
		}
	}
	return nil
}

// hasKilnTag reports whether a build used any of kiln's tags.
func hasKilnTag(tags []string) bool {
	return slices.ContainsFunc(tags, func(t string) bool { return strings.HasPrefix(t, "kiln_") })
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// bundleMediaTypes are the Sigstore bundle media types kiln verifies: v0.3,
// what cosign v3 (`sign-blob --bundle`) and kiln sign write, in the two
// spellings sigstore-go reads as v0.3. Earlier versions (v0.1, v0.2) exist
// for transparency-log entries this offline check does not read, and later
// ones are unknown: both are refused rather than guessed at.
var bundleMediaTypes = []string{bundleMediaType, "application/vnd.dev.sigstore.bundle+json;version=0.3"}

// checkBundleMetadata checks what a key-signed bundle says about itself,
// before its signature is checked: its media type, and that its public-key
// hint (base64 SHA-256 of the PKIX DER key, as cosign and kiln compute it)
// names the key verifying it. The hint is not a signature, so it cannot
// let a bundle pass; it catches a bundle made for, or edited to name,
// another key. A bundle without a hint is refused: cosign and kiln always
// write one.
func checkBundleMetadata(name string, b *bundle, v signature.Verifier) error {
	if !slices.Contains(bundleMediaTypes, b.MediaType) {
		if strings.HasPrefix(b.MediaType, "application/vnd.dev.sigstore.bundle") {
			return fmt.Errorf("%s: mediaType %q: unsupported Sigstore bundle version (kiln verifies %s)", name, b.MediaType, bundleMediaType)
		}
		return fmt.Errorf("%s: mediaType %q is not a Sigstore bundle media type (want %s)", name, b.MediaType, bundleMediaType)
	}
	if b.VerificationMaterial.PublicKey == nil || b.VerificationMaterial.PublicKey.Hint == "" {
		return fmt.Errorf("%s: public-key hint: verificationMaterial.publicKey.hint is missing (cosign and kiln always write it)", name)
	}
	want, err := KeyHint(v)
	if err != nil {
		return fmt.Errorf("%s: public-key hint: %v", name, err)
	}
	if got := b.VerificationMaterial.PublicKey.Hint; got != want {
		return fmt.Errorf("%s: public-key hint %q names another key than the one given to verify (hint %s)", name, got, want)
	}
	return nil
}
