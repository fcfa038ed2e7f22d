package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// `kiln verify` checks the metadata of BIN.sigstore.json, not only its
// signature: a wrong or unknown mediaType, or a public-key hint naming
// another key, is exit 5 with the failed check named.
func TestVerifyBundleMetadata(t *testing.T) {
	bin, pub := signedBuild(t)
	if code, out, errOut := supplyRun(t, "verify", bin, "--key", pub); code != cli.ExitOK {
		t.Fatalf("the genuine bundle: exit %d\n%s%s", code, out, errOut)
	}
	otherPrefix := filepath.Join(t.TempDir(), "other")
	if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", otherPrefix); code != 0 {
		t.Fatal(errOut)
	}
	// The hint the other key's bundles carry, taken from a bundle it signed.
	signedByOther := copyArtifacts(t, bin)
	if code, _, errOut := supplyRun(t, "sign", signedByOther, "--key", otherPrefix+".key"); code != 0 {
		t.Fatal(errOut)
	}
	otherBundle, err := os.ReadFile(signedByOther + ".sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	ownBundle, err := os.ReadFile(bin + ".sigstore.json")
	if err != nil {
		t.Fatal(err)
	}
	ownHint, otherHint := hintOf(ownBundle), hintOf(otherBundle)
	if otherHint == "" || ownHint == "" || otherHint == ownHint {
		t.Fatalf("hints: own %q, other %q", ownHint, otherHint)
	}
	const v03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
	cases := []struct {
		name, old, repl, want string
	}{
		{"wrong mediaType", v03, "application/vnd.in-toto+json", `supply.sigstore.json: mediaType "application/vnd.in-toto+json" is not a Sigstore bundle media type`},
		{"unknown mediaType", v03, "application/vnd.dev.sigstore.bundle.v0.7+json", `supply.sigstore.json: mediaType "application/vnd.dev.sigstore.bundle.v0.7+json": unsupported Sigstore bundle version`},
		{"hint of another key", ownHint, otherHint, "supply.sigstore.json: public-key hint " + `"` + otherHint + `" names another key`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := copyArtifacts(t, bin)
			if !strings.Contains(string(ownBundle), tc.old) {
				t.Fatalf("the bundle lacks %q:\n%s", tc.old, ownBundle)
			}
			edited := strings.Replace(string(ownBundle), tc.old, tc.repl, 1)
			if err := os.WriteFile(b+".sigstore.json", []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := supplyRun(t, "verify", b, "--key", pub)
			if code != cli.ExitFailed {
				t.Fatalf("exit %d, want 5\n%s%s", code, out, errOut)
			}
			if !strings.Contains(out, "FAIL supply: signature: ") || !strings.Contains(out, tc.want) ||
				!strings.Contains(errOut, "REFUSED: supply: signature: ") || !strings.Contains(errOut, tc.want) {
				t.Errorf("output lacks %q:\n%s%s", tc.want, out, errOut)
			}
		})
	}
}

// hintOf returns the public-key hint written in a bundle.
func hintOf(bundle []byte) string {
	_, rest, _ := strings.Cut(string(bundle), `"hint":"`)
	hint, _, _ := strings.Cut(rest, `"`)
	return hint
}
