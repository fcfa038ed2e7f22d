package supply

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherBuild returns a second signed binary, in its own folder and under
// the same name as signedSample's, whose digest differs (one byte more at
// the end: its build info still reads), with its own manifest, SBOM and
// provenance signed by the same key.
func otherBuild(t *testing.T) string {
	t.Helper()
	bin := sampleBinary(t)
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	writeArtifacts(t, bin)
	s, _ := sharedKey(t, filepath.Dir(bin))
	if _, err := SignArtifacts(s, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// takeSidecar copies suffix's document, with its signature and bundle,
// from one build to the other.
func takeSidecar(t *testing.T, from, to, suffix string) {
	t.Helper()
	for _, s := range []string{"", SigSuffix, BundleSuffix} {
		data, err := os.ReadFile(from + suffix + s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+suffix+s, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// resign rewrites a sidecar through edit and signs it again with the
// build's key, so only its content can be wrong.
func resign(t *testing.T, bin, suffix string, edit func(doc map[string]any)) {
	t.Helper()
	path := bin + suffix
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if data, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := sharedKey(t, filepath.Dir(bin))
	if err := SignFile(s, path); err != nil {
		t.Fatal(err)
	}
}

// A validly signed SBOM or provenance that describes another binary is
// refused: signatures only prove who signed each file, and only the
// binary digest each names ties them to this binary. The swapped file's
// own signature passes, so the digest check is what refuses it, and it is
// the only check that fails.
func TestVerifyRefusesAnotherBuildsSidecars(t *testing.T) {
	cases := []struct {
		name   string
		suffix string
		edit   func(t *testing.T, bin string) // nil: another build's file
		want   string
	}{
		{"SBOM of another build", SBOMSuffix, nil, "hello.cdx.json: binary digest: metadata.component SHA-256 "},
		{"provenance of another build", ProvenanceSuffix, nil, "hello.intoto.json: binary digest: subject sha256 "},
		{"SBOM without its digest", SBOMSuffix, func(t *testing.T, bin string) {
			resign(t, bin, SBOMSuffix, func(doc map[string]any) {
				delete(doc["metadata"].(map[string]any)["component"].(map[string]any), "hashes")
			})
		}, "hello.cdx.json: binary digest: metadata.component SHA-256 is missing"},
		{"provenance without its digest", ProvenanceSuffix, func(t *testing.T, bin string) {
			resign(t, bin, ProvenanceSuffix, func(doc map[string]any) {
				delete(doc["subject"].([]any)[0].(map[string]any), "digest")
			})
		}, "hello.intoto.json: binary digest: subject sha256 is missing"},
		{"provenance naming a second subject", ProvenanceSuffix, func(t *testing.T, bin string) {
			resign(t, bin, ProvenanceSuffix, func(doc map[string]any) {
				subjects := doc["subject"].([]any)
				doc["subject"] = append(subjects, map[string]any{"name": "other", "digest": map[string]any{"sha256": strings.Repeat("0", 64)}})
			})
		}, "hello.intoto.json: binary digest: want exactly one subject, found 2"},
		{"provenance naming no subject", ProvenanceSuffix, func(t *testing.T, bin string) {
			resign(t, bin, ProvenanceSuffix, func(doc map[string]any) { doc["subject"] = []any{} })
		}, "hello.intoto.json: binary digest: want exactly one subject, found 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, pub := signedSample(t)
			binSHA, err := FileSHA256(bin)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.edit == nil {
				other := otherBuild(t)
				otherSHA, err := FileSHA256(other)
				if err != nil || otherSHA == binSHA {
					t.Fatalf("the other build has the same digest %s (%v)", otherSHA, err)
				}
				takeSidecar(t, other, bin, tc.suffix)
				want += otherSHA + " does not match hello (sha256 " + binSHA + ")"
			} else {
				tc.edit(t, bin)
			}
			v, err := LoadVerifier(pub)
			if err != nil {
				t.Fatal(err)
			}
			r := Verify(bin, v)
			if err := r.Err(); err == nil || err.Error() != want {
				t.Fatalf("verify: %v\nwant %s", err, want)
			}
			failed := 0
			for _, c := range r.Checks {
				if c.Err == nil {
					continue
				}
				failed++
				if c.File != "hello"+tc.suffix || c.Name != "binary digest" {
					t.Errorf("%s: %s failed too: %v", c.File, c.Name, c.Err)
				}
			}
			if failed != 1 {
				t.Errorf("%d checks failed, want only the binary digest", failed)
			}
		})
	}
}
