package supply

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cosign runs the real cosign CLI in dir with COSIGN_PASSWORD=password and
// a private HOME, so nothing outside the test is read or written.
func cosign(t *testing.T, dir, password string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(cosignPath(t), args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password, "HOME="+home, "TUF_ROOT="+filepath.Join(home, "tuf"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The issue's deployment gate: `cosign verify-blob --key cosign.pub
// --signature BIN.sig BIN`, offline, accepts what kiln signed, both the
// plain signature and the bundle, and refuses a changed binary.
func TestCosignVerifiesKilnSignatures(t *testing.T) {
	cosignPath(t)
	bin, pub := signedSample(t)
	dir := filepath.Dir(bin)
	for _, f := range append([]string{bin}, Sidecars(bin)...) {
		name := filepath.Base(f)
		out, err := cosign(t, dir, "", "verify-blob", "--key", pub, "--signature", name+SigSuffix, "--insecure-ignore-tlog=true", name)
		if err != nil || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign verify-blob --signature %s: %v\n%s", name+SigSuffix, err, out)
		}
		out, err = cosign(t, dir, "", "verify-blob", "--key", pub, "--bundle", name+BundleSuffix, "--insecure-ignore-tlog=true", name)
		if err != nil || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign verify-blob --bundle %s: %v\n%s", name+BundleSuffix, err, out)
		}
	}
	data, _ := os.ReadFile(bin)
	data[len(data)/3] ^= 0x80
	os.WriteFile(bin, data, 0o755)
	if out, err := cosign(t, dir, "", "verify-blob", "--key", pub, "--signature", "hello.sig", "--insecure-ignore-tlog=true", "hello"); err == nil {
		t.Fatalf("cosign accepted a changed binary:\n%s", out)
	}
}

// Keys from `cosign generate-key-pair` sign in kiln, and what cosign signs
// (plain signature or bundle, offline) passes `kiln verify`'s checks.
func TestKilnVerifiesCosignSignatures(t *testing.T) {
	cosignPath(t)
	bin := sampleBinary(t)
	dir := filepath.Dir(bin)
	writeArtifacts(t, bin)
	if out, err := cosign(t, dir, "pw", "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	key, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")

	// Key interop: kiln loads cosign's key (with its password) and cosign
	// verifies what kiln signs with it.
	s, err := LoadSigner(key, []byte("pw"))
	if err != nil {
		t.Fatalf("kiln cannot load cosign's key: %v", err)
	}
	if err := SignFile(s, bin+ManifestSuffix); err != nil {
		t.Fatal(err)
	}
	if out, err := cosign(t, dir, "", "verify-blob", "--key", "cosign.pub", "--signature", "hello.manifest.json.sig", "--insecure-ignore-tlog=true", "hello.manifest.json"); err != nil {
		t.Fatalf("cosign rejects kiln's signature made with cosign's key: %v\n%s", err, out)
	}

	// cosign signs the binary, SBOM and provenance: signature files ...
	for _, name := range []string{"hello", "hello" + SBOMSuffix, "hello" + ProvenanceSuffix} {
		out, err := cosign(t, dir, "pw", "sign-blob", "--key", "cosign.key", "--tlog-upload=false", "--new-bundle-format=false",
			"--use-signing-config=false", "--output-signature", name+SigSuffix, "--yes", name)
		if err != nil {
			t.Fatalf("cosign sign-blob %s: %v\n%s", name, err, out)
		}
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	if r := Verify(bin, v); !r.OK() {
		t.Fatalf("kiln verify refuses cosign's signature: %v", r.Err())
	}
	// ... and a v3 bundle, alone.
	os.Remove(bin + SigSuffix)
	os.Remove(bin + BundleSuffix)
	out, err := cosign(t, dir, "pw", "sign-blob", "--key", "cosign.key", "--bundle", "hello.sigstore.json",
		"--use-signing-config=false", "--tlog-upload=false", "--yes", "hello")
	if err != nil {
		t.Fatalf("cosign sign-blob --bundle: %v\n%s", err, out)
	}
	if err := VerifyFile(v, bin); err != nil {
		t.Fatalf("kiln refuses cosign's bundle: %v", err)
	}
	if r := Verify(bin, v); !r.OK() {
		t.Fatalf("kiln verify refuses cosign's bundle: %v", r.Err())
	}

	// A cosign signature from another key is refused.
	other := t.TempDir()
	if out, err := cosign(t, other, "", "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	ov, err := LoadVerifier(filepath.Join(other, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyFile(ov, bin); err == nil {
		t.Fatal("cosign signature accepted under another key")
	}
}

// cosign signs with a key pair kiln generated (both passwords).
func TestCosignUsesKilnKeys(t *testing.T) {
	cosignPath(t)
	dir := t.TempDir()
	for _, pw := range []string{"", "hunter2"} {
		key, pub := writeKeyPair(t, dir, "kiln"+pw, []byte(pw))
		blob := filepath.Join(dir, "blob"+pw)
		os.WriteFile(blob, []byte("payload "+pw), 0o644)
		out, err := cosign(t, dir, pw, "sign-blob", "--key", key, "--tlog-upload=false", "--new-bundle-format=false",
			"--use-signing-config=false", "--output-signature", blob+".sig", "--yes", blob)
		if err != nil {
			t.Fatalf("password %q: cosign cannot sign with kiln's key: %v\n%s", pw, err, out)
		}
		v, err := LoadVerifier(pub)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyFile(v, blob); err != nil {
			t.Fatalf("password %q: %v", pw, err)
		}
	}
}
