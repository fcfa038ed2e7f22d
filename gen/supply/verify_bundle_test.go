package supply

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
)

// editBundle rewrites path.sigstore.json through edit, as a JSON object.
func editBundle(t *testing.T, path string, edit func(doc map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path + BundleSuffix)
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
	if err := os.WriteFile(path+BundleSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// otherKeyHint is the public-key hint of a fresh P-256 key.
func otherKeyHint(t *testing.T) string {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadECDSAVerifier(&priv.PublicKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	hint, err := KeyHint(v)
	if err != nil {
		t.Fatal(err)
	}
	return hint
}

func setHint(hint string) func(doc map[string]any) {
	return func(doc map[string]any) {
		doc["verificationMaterial"].(map[string]any)["publicKey"].(map[string]any)["hint"] = hint
	}
}

func setMediaType(mt string) func(doc map[string]any) {
	return func(doc map[string]any) { doc["mediaType"] = mt }
}

// A bundle's media type and public-key hint are checked: a bundle of an
// unknown or wrong type, or naming another key, is refused with the check
// named, even though its signature is genuine.
func TestVerifyChecksBundleMetadata(t *testing.T) {
	cases := []struct {
		name string
		edit func(doc map[string]any)
		want string // "" = still verifies
	}{
		{"genuine", func(map[string]any) {}, ""},
		{"v0.3 in its other spelling", setMediaType("application/vnd.dev.sigstore.bundle+json;version=0.3"), ""},
		{"wrong mediaType", setMediaType("application/vnd.in-toto+json"),
			`hello.sigstore.json: mediaType "application/vnd.in-toto+json" is not a Sigstore bundle media type`},
		{"no mediaType", func(doc map[string]any) { delete(doc, "mediaType") },
			`hello.sigstore.json: mediaType "" is not a Sigstore bundle media type`},
		{"unknown bundle version", setMediaType("application/vnd.dev.sigstore.bundle.v0.9+json"),
			`hello.sigstore.json: mediaType "application/vnd.dev.sigstore.bundle.v0.9+json": unsupported Sigstore bundle version`},
		{"older bundle version", setMediaType("application/vnd.dev.sigstore.bundle+json;version=0.1"),
			`mediaType "application/vnd.dev.sigstore.bundle+json;version=0.1": unsupported Sigstore bundle version`},
		{"hint of another key", setHint(otherKeyHint(t)), "hello.sigstore.json: public-key hint "},
		{"empty hint", setHint(""), "hello.sigstore.json: public-key hint: verificationMaterial.publicKey.hint is missing"},
		{"no public key", func(doc map[string]any) { doc["verificationMaterial"] = map[string]any{} },
			"public-key hint: verificationMaterial.publicKey.hint is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, pub := signedSample(t)
			editBundle(t, bin, tc.edit)
			v, err := LoadVerifier(pub)
			if err != nil {
				t.Fatal(err)
			}
			err = Verify(bin, v).Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "hello: signature: ") || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if tc.name == "hint of another key" && !strings.Contains(err.Error(), "names another key") {
				t.Errorf("error does not say the hint names another key: %v", err)
			}
		})
	}
}

// What the real cosign writes with `sign-blob --key --bundle` passes the
// metadata checks, and the same bundle edited to name another key does
// not (cosign itself ignores the hint when given --key).
func TestCosignBundleMetadata(t *testing.T) {
	cosignPath(t)
	bin := sampleBinary(t)
	dir := filepath.Dir(bin)
	writeArtifacts(t, bin)
	_, pub := sharedKey(t, dir)
	out, err := cosign(t, dir, "", "sign-blob", "--key", "cosign.key", "--bundle", "hello"+BundleSuffix,
		"--use-signing-config=false", "--tlog-upload=false", "--yes", "hello")
	if err != nil {
		t.Fatalf("cosign sign-blob --bundle: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(bin + BundleSuffix)
	var b bundle
	if err := json.Unmarshal(data, &b); err != nil || b.MediaType != bundleMediaType {
		t.Fatalf("cosign wrote mediaType %q (%v), want %s", b.MediaType, err, bundleMediaType)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyFile(v, bin); err != nil {
		t.Fatalf("kiln refuses cosign's bundle: %v", err)
	}
	editBundle(t, bin, setHint(otherKeyHint(t)))
	if err := VerifyFile(v, bin); err == nil || !strings.Contains(err.Error(), "names another key") {
		t.Fatalf("a cosign bundle naming another key: %v", err)
	}
}
