package sealed

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// sealedNeeds is the kind of canonical needs JSON a generated needs_gen.go
// registers: a read-write path a patch could widen to "/" in place.
const sealedNeeds = `{"workflow":"root-needs","needs":[{"id":"filesystem:/srv/answer:rw","kind":"filesystem","optional":false,"path":"/srv/answer","mode":"rw","sources":["workflow:root-needs"]}]}`

// withNeeds makes data (nil: none) the embedded needs for one test and
// puts back what was registered before.
func withNeeds(t *testing.T, data []byte) {
	t.Helper()
	needsMu.Lock()
	oldData, oldOK, oldKinds := needsJSON, needsRegistered, unprovided
	needsJSON, needsRegistered, unprovided = data, data != nil, nil
	needsMu.Unlock()
	t.Cleanup(func() {
		needsMu.Lock()
		needsJSON, needsRegistered, unprovided = oldData, oldOK, oldKinds
		needsMu.Unlock()
	})
}

// A binary whose embedded needs no longer hash to the manifest's
// effective_needs_sha256 refuses every start with exit 8 (docs/needs.md):
// a patched needs string (here "/srv/answer" widened to "/" padded to the
// same length) must not reach the preflight or the run. Unaltered needs
// pass the same check.
func TestAlteredNeedsRefuseToStart(t *testing.T) {
	wf, m, _ := verifiable(t, "needs")
	m.EffectiveNeedsSHA256 = digest([]byte(sealedNeeds))
	raw, err := manifest.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	start := func(t *testing.T, blob []byte, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := Run(args, wf, blob, Options{Prog: "answer", Stdout: &out, Stderr: &errb})
		return code, out.String(), errb.String()
	}

	t.Run("unaltered", func(t *testing.T) {
		withNeeds(t, []byte(sealedNeeds))
		var out bytes.Buffer
		if err := verify(&out, wf, m); err != nil || !strings.Contains(out.String(), "ok   embedded effective needs match effective_needs_sha256 "+m.EffectiveNeedsSHA256) {
			t.Fatalf("verify: %v\n%s", err, out.String())
		}
		if code, _, stderr := start(t, []byte(manifest.Wrap(raw)), "needs"); code == cli.ExitTampered || strings.Contains(stderr, "altered") {
			t.Fatalf("unaltered needs refused: exit %d, %s", code, stderr)
		}
	})

	patched := strings.Replace(sealedNeeds, `"path":"/srv/answer"`, `"path":"/`+strings.Repeat(" ", len("srv/answer"))+`"`, 1)
	if len(patched) != len(sealedNeeds) || patched == sealedNeeds {
		t.Fatal("the patch must keep the length and change the needs")
	}
	cases := []struct {
		name, want string
		needs      []byte
		recorded   string // the manifest's effective_needs_sha256
	}{
		{"patched in place", "embedded effective needs hash to " + digest([]byte(patched)) + ", but the manifest says effective_needs_sha256 " + digest([]byte(sealedNeeds)),
			[]byte(patched), digest([]byte(sealedNeeds))},
		{"removed", "the manifest records effective needs (sha256 " + digest([]byte(sealedNeeds)) + "), but none are embedded",
			nil, digest([]byte(sealedNeeds))},
		{"not recorded", "embedded effective needs hash to " + digest([]byte(sealedNeeds)),
			[]byte(sealedNeeds), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withNeeds(t, tc.needs)
			m := *m
			m.EffectiveNeedsSHA256 = tc.recorded
			raw, err := manifest.Encode(&m)
			if err != nil {
				t.Fatal(err)
			}
			blob := []byte(manifest.Wrap(raw))
			for _, args := range [][]string{nil, {"needs"}, {"--mode", "serve"}, {"--quiet"}} {
				code, out, stderr := start(t, blob, args...)
				if code != cli.ExitTampered || out != "" {
					t.Errorf("%q: exit %d (want %d), stdout %q", args, code, cli.ExitTampered, out)
				}
				for _, want := range []string{"answer: this binary was altered after sealing: " + tc.want, "refusing to start"} {
					if !strings.Contains(stderr, want) {
						t.Errorf("%q: stderr %q lacks %q", args, stderr, want)
					}
				}
			}
			var out bytes.Buffer
			if err := verify(&out, wf, &m); err == nil || !strings.Contains(out.String(), "FAIL "+tc.want) {
				t.Errorf("verify passed altered needs: %v\n%s", err, out.String())
			}
		})
	}
}

// The run CLI gets the embedded needs (so the preflight checks them) and
// the node kinds a degraded build leaves out; a binary generated without
// needs gets none and still starts.
func TestBuildHandsTheEmbeddedNeedsToTheCLI(t *testing.T) {
	m := &manifest.Manifest{Families: []manifest.Family{{ID: "fs", Keys: []string{"filesystem"}}}}
	t.Run("embedded", func(t *testing.T) {
		withNeeds(t, []byte(sealedNeeds))
		RegisterNeeds([]byte(sealedNeeds), "http_request")
		b, err := build(m)
		if err != nil {
			t.Fatal(err)
		}
		if b.Needs == nil || b.Needs.Workflow != "root-needs" || len(b.Needs.Needs) != 1 || b.Needs.Needs[0].Path != "/srv/answer" {
			t.Fatalf("needs handed to the CLI: %+v", b.Needs)
		}
		if len(b.Unprovided) != 1 || b.Unprovided[0] != "http_request" || len(b.Families["fs"]) != 1 {
			t.Fatalf("build %+v", b)
		}
	})
	t.Run("none", func(t *testing.T) {
		withNeeds(t, nil)
		if b, err := build(m); err != nil || b.Needs != nil {
			t.Fatalf("without embedded needs: %+v %v", b, err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		withNeeds(t, []byte("{"))
		if _, err := build(m); err == nil || !strings.Contains(err.Error(), "embedded effective needs are not valid JSON") {
			t.Fatalf("got %v", err)
		}
	})
}
