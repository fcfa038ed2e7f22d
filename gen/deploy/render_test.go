package deploy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/deploy"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// normalize replaces what changes with every kiln or Go change (the
// digests of the manifest, the binary and the image) by placeholders, so
// the goldens hold the shape of the deployment.
func normalize(s *deploy.Seal, data []byte) []byte {
	out := bytes.ReplaceAll(data, []byte(s.ManifestDigest), []byte("sha256:MANIFEST"))
	out = bytes.ReplaceAll(out, []byte(s.BinarySHA256), []byte("BINARY"))
	if i := bytes.Index(out, []byte("@sha256:")); i >= 0 {
		out = append(out[:i+8:i+8], append([]byte("IMAGE"), out[i+8+64:]...)...)
	}
	return out
}

// generate renders every target of a sealed example.
func generate(t *testing.T, name string) (*deploy.Seal, []deploy.File) {
	t.Helper()
	s, sp := spec(t, name)
	files, err := deploy.K8s(sp, sp.Name+"@sha256:"+strings.Repeat("0", 64), true)
	if err != nil {
		t.Fatal(err)
	}
	units, err := deploy.Systemd(sp, deploy.DefaultExecPath(sp))
	if err != nil {
		t.Fatal(err)
	}
	return s, append(files, units...)
}

var examples = []string{"hello", "webhook", "cron-poller", "testdata/vault"}

func TestGolden(t *testing.T) {
	for _, name := range examples {
		t.Run(filepath.Base(name), func(t *testing.T) {
			s, files := generate(t, name)
			for _, f := range files {
				got := normalize(s, f.Data)
				golden := filepath.Join("testdata", "golden", f.Name)
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test ./gen/deploy -run TestGolden -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s (go test ./gen/deploy -run TestGolden -update, then review the diff):\n%s", f.Name, golden, got)
				}
			}
		})
	}
}

// Every file carries the manifest digest of the binary it came from, and
// Stamps reads it back.
func TestStamps(t *testing.T) {
	s, files := generate(t, "webhook")
	dir := t.TempDir()
	if _, err := deploy.WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	stamps, err := deploy.Stamps(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(stamps) != len(files) {
		t.Fatalf("%d stamps for %d files: %+v", len(stamps), len(files), stamps)
	}
	for _, st := range stamps {
		if st.Digest != s.ManifestDigest {
			t.Errorf("%s: stamp %s, want %s", st.File, st.Digest, s.ManifestDigest)
		}
	}
	// An existing file is never overwritten.
	if _, err := deploy.WriteFiles(dir, files[:1]); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second write: %v, want a refusal", err)
	}
}

var (
	anyHex  = regexp.MustCompile(`[0-9a-f]{64}`)
	anySize = regexp.MustCompile(`"size":\d+`)
)

// The image's config and manifest, with every digest and size replaced,
// are golden too: user, entrypoint, labels, annotations, media types.
func TestGoldenImage(t *testing.T) {
	for _, name := range []string{"hello", "webhook"} {
		t.Run(name, func(t *testing.T) {
			s, sp := spec(t, name)
			img, err := deploy.Image(s, sp, deploy.ImageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := img.RawConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			man, err := img.RawManifest()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			for _, raw := range [][]byte{cfg, man} {
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(v) // sorted keys
				b = anySize.ReplaceAll(anyHex.ReplaceAll(b, []byte("HEX")), []byte(`"size":N`))
				b = bytes.ReplaceAll(b, []byte(`"architecture":"`+s.GOARCH+`"`), []byte(`"architecture":"GOARCH"`))
				got.Write(b)
				got.WriteByte('\n')
			}
			golden := filepath.Join("testdata", "golden", name+".image.json")
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gen/deploy -run TestGoldenImage -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("image config and manifest differ from %s:\n%s", golden, got.Bytes())
			}
		})
	}
}
