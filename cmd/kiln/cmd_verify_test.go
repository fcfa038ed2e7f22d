package main

// End-to-end supply-chain tests: kiln keygen, build --sign-key, sign,
// verify, the sealed binary's verify, tampering, reproducibility and
// air-gapped use, on testdata/supply (a workflow calling a child).

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// supplyRun runs kiln in-process.
func supplyRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// exe runs a program and returns its exit code and combined output.
func exe(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}

// supplyRoot is the kiln checkout, resolved before any test changes the
// working directory.
var supplyRoot, supplyRootErr = filepath.Abs("../..")

func kilnRoot(t *testing.T) string {
	t.Helper()
	if supplyRootErr != nil {
		t.Fatal(supplyRootErr)
	}
	return supplyRoot
}

// copySupplyWorkflow copies testdata/supply into a fresh directory and returns the
// path of its workflow.toml there.
func copySupplyWorkflow(t *testing.T) string {
	t.Helper()
	src := filepath.Join(kilnRoot(t), "testdata", "supply")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "workflow.toml")
}

// signedBuild builds testdata/supply into a fresh directory with a new
// cosign key pair and --sign-key; it returns the binary and public key.
func signedBuild(t *testing.T) (bin, pub string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "correct horse")
	prefix := filepath.Join(dir, "cosign")
	if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", prefix); code != cli.ExitOK {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	bin = filepath.Join(dir, "supply")
	code, out, errOut := supplyRun(t, "build", copySupplyWorkflow(t), "-o", bin, "--kiln-source", kilnRoot(t), "--sign-key", prefix+".key")
	if code != cli.ExitOK {
		t.Fatalf("build: exit %d\n%s%s", code, out, errOut)
	}
	return bin, prefix + ".pub"
}

// copyArtifacts copies bin and every file beside it named bin.* into a
// fresh directory, so each tampering case starts from a clean build.
func copyArtifacts(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	matches, _ := filepath.Glob(bin + ".*")
	for _, f := range append(matches, bin) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, filepath.Base(bin))
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "")
	prefix := filepath.Join(dir, "release")
	code, out, _ := supplyRun(t, "keygen", "--output-key-prefix", prefix)
	if code != cli.ExitOK || !strings.Contains(out, "release.key") {
		t.Fatalf("keygen: exit %d: %s", code, out)
	}
	key, _ := os.ReadFile(prefix + ".key")
	pub, _ := os.ReadFile(prefix + ".pub")
	if !bytes.HasPrefix(key, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) || !bytes.HasPrefix(pub, []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Fatalf("not a cosign key pair:\n%s\n%s", key, pub)
	}
	if st, _ := os.Stat(prefix + ".key"); st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := supply.LoadSigner(prefix+".key", []byte{}); err != nil {
		t.Fatalf("empty-password key does not load: %v", err)
	}
	// Existing files are kept unless --force.
	code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", prefix)
	if code != cli.ExitUsage || !strings.Contains(errOut, "exists; pass --force") {
		t.Fatalf("overwrite: exit %d: %s", code, errOut)
	}
	if again, _ := os.ReadFile(prefix + ".key"); !bytes.Equal(again, key) {
		t.Fatal("keygen overwrote a key without --force")
	}
	if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", prefix, "--force"); code != cli.ExitOK {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	if again, _ := os.ReadFile(prefix + ".key"); bytes.Equal(again, key) {
		t.Fatal("--force did not write a new key")
	}
	// --ed25519 writes a workflow signing pair.
	code, _, errOut = supplyRun(t, "keygen", "--ed25519", "--output-key-prefix", filepath.Join(dir, "wf"))
	if code != cli.ExitOK {
		t.Fatalf("--ed25519: exit %d: %s", code, errOut)
	}
	if _, err := supply.LoadEd25519PrivateKey(filepath.Join(dir, "wf.key"), []byte{}); err != nil {
		t.Fatal(err)
	}
}

func TestBuildSignVerify(t *testing.T) {
	bin, pub := signedBuild(t)
	for _, f := range []string{"", ".sig", ".sigstore.json", ".manifest.json", ".manifest.json.sig", ".cdx.json", ".cdx.json.sig", ".intoto.json", ".intoto.json.sig"} {
		if _, err := os.Stat(bin + f); err != nil {
			t.Errorf("kiln build --sign-key did not write %s", filepath.Base(bin+f))
		}
	}
	code, out, errOut := supplyRun(t, "verify", bin, "--key", pub)
	if code != cli.ExitOK || !strings.Contains(out, "supply: verified") {
		t.Fatalf("kiln verify: exit %d\n%s%s", code, out, errOut)
	}
	// The manifest beside the binary lists both workflow files and the
	// binary's digest.
	data, _ := os.ReadFile(bin + supply.ManifestSuffix)
	sum, _ := supply.FileSHA256(bin)
	for _, want := range []string{`"binary_sha256": "` + sum + `"`, `"path": "workflow.toml"`, `"path": "child/wrap.toml"`, `"tables_sha256"`, `"modules"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("manifest lacks %s", want)
		}
	}
	// The sealed binary checks itself and still runs.
	if code, out := exe(t, nil, bin, "verify"); code != cli.ExitOK || !strings.Contains(out, "2 embedded workflow source(s) match") {
		t.Fatalf("%s verify: exit %d\n%s", bin, code, out)
	}
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"who":"ops"}`), 0o644)
	if code, out := exe(t, nil, bin, "--input", in); code != cli.ExitOK || !strings.Contains(out, "[tables-canary-7f3a greets ops]") {
		t.Fatalf("sealed run: exit %d\n%s", code, out)
	}

	// kiln sign re-signs in place; cosign verifies what kiln signed.
	dir := filepath.Dir(bin)
	if code, out, errOut := supplyRun(t, "sign", bin, "--key", filepath.Join(dir, "cosign.key")); code != cli.ExitOK || strings.Count(out, "wrote ") != 8 {
		t.Fatalf("kiln sign: exit %d\n%s%s", code, out, errOut)
	}
	t.Run("cosign verify-blob", func(t *testing.T) {
		cosign := testtool.CacheBin(t, "cosign") // fails under CI=true when missing
		code, out := exe(t, []string{"HOME=" + t.TempDir()}, cosign, "verify-blob", "--key", pub, "--signature", bin+".sig", "--insecure-ignore-tlog=true", bin)
		if code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign verify-blob: exit %d\n%s", code, out)
		}
	})
}

// canaryAt finds the canary string of testdata/supply in a binary: in the
// embedded workflow source (inSource) or in the static tables.
func canaryAt(t *testing.T, data []byte, inSource bool) int {
	t.Helper()
	canary := []byte("tables-canary-7f3a")
	prefix := []byte(`template = "`)
	for off := 0; ; {
		i := bytes.Index(data[off:], canary)
		if i < 0 {
			break
		}
		i += off
		if bytes.HasSuffix(data[:i], prefix) == inSource {
			return i
		}
		off = i + 1
	}
	t.Fatalf("canary (in source: %v) not found in the binary", inSource)
	return 0
}

func TestTamperingRefused(t *testing.T) {
	bin, pub := signedBuild(t)
	flip := func(suffix string, at func(t *testing.T, data []byte) int) func(t *testing.T, bin string) {
		return func(t *testing.T, bin string) {
			data, err := os.ReadFile(bin + suffix)
			if err != nil {
				t.Fatal(err)
			}
			data[at(t, data)] ^= 0x20 // flips the case of a letter
			if err := os.WriteFile(bin+suffix, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	find := func(s string) func(t *testing.T, data []byte) int {
		return func(t *testing.T, data []byte) int {
			i := bytes.Index(data, []byte(s))
			if i < 0 {
				t.Fatalf("%q not found", s)
			}
			return i + len(s)
		}
	}
	cases := []struct {
		name       string
		tamper     func(t *testing.T, bin string)
		key        string // "" = the right key
		verifyWant []string
		sealedWant string // "" = the sealed binary's own verify still passes
	}{
		{name: "binary byte", tamper: flip("", func(_ *testing.T, d []byte) int { return len(d) / 2 }),
			verifyWant: []string{"supply: signature: supply.sig: signature does not match supply"}},
		{name: "manifest byte", tamper: flip(".manifest.json", find(`"name": "s`)),
			verifyWant: []string{"supply.manifest.json: signature: supply.manifest.json.sig: signature does not match supply.manifest.json"}},
		{name: "signature", tamper: flip(".sig", func(_ *testing.T, d []byte) int { return 20 }),
			verifyWant: []string{"supply: signature: supply.sig"}},
		{name: "embedded workflow source", tamper: flip("", func(t *testing.T, d []byte) int { return canaryAt(t, d, true) }),
			verifyWant: []string{"supply.sig: signature does not match supply", "FAIL supply.manifest.json: binary digest"},
			sealedWant: "embedded workflow source hashes to"},
		{name: "static tables", tamper: flip("", func(t *testing.T, d []byte) int { return canaryAt(t, d, false) }),
			verifyWant: []string{"supply.sig: signature does not match supply"},
			sealedWant: "static tables hash to"},
		{name: "wrong key", key: "other",
			verifyWant: []string{"supply: signature: supply.sig: signature does not match supply under this key"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := copyArtifacts(t, bin)
			if tc.tamper != nil {
				tc.tamper(t, b)
			}
			key := pub
			if tc.key != "" {
				prefix := filepath.Join(t.TempDir(), tc.key)
				if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", prefix); code != cli.ExitOK {
					t.Fatal(errOut)
				}
				key = prefix + ".pub"
			}
			code, out, errOut := supplyRun(t, "verify", b, "--key", key)
			if code != cli.ExitFailed {
				t.Fatalf("kiln verify: exit %d, want %d\n%s%s", code, cli.ExitFailed, out, errOut)
			}
			for _, w := range tc.verifyWant {
				if !strings.Contains(out+errOut, w) {
					t.Errorf("kiln verify output lacks %q:\n%s%s", w, out, errOut)
				}
			}
			if !strings.Contains(errOut, "REFUSED") {
				t.Errorf("stderr does not say REFUSED: %s", errOut)
			}
			code, sout := exe(t, nil, b, "verify")
			switch {
			case tc.sealedWant == "" && code != cli.ExitOK:
				t.Errorf("sealed verify: exit %d\n%s", code, sout)
			case tc.sealedWant != "" && (code != cli.ExitFailed || !strings.Contains(sout, tc.sealedWant)):
				t.Errorf("sealed verify: exit %d, want %d and %q\n%s", code, cli.ExitFailed, tc.sealedWant, sout)
			}
		})
	}
}

// The same workflow built from two directories, from two working
// directories, gives the same bytes: binary, manifest, SBOM, provenance.
// The second build uses an empty Go build cache, so nothing is reused from
// the first (about 10 s; -short keeps the shared cache).
func TestReproducibleBuild(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var sums [2]map[string]string
	for i := range sums {
		wf := copySupplyWorkflow(t)
		t.Chdir(t.TempDir())
		if i == 1 && !testing.Short() {
			t.Setenv("GOCACHE", t.TempDir())
		}
		bin := filepath.Join(t.TempDir(), "supply")
		if code, out, errOut := supplyRun(t, "build", wf, "-o", bin, "--kiln-source", kilnRoot(t)); code != cli.ExitOK {
			t.Fatalf("build %d: exit %d\n%s%s", i, code, out, errOut)
		}
		sums[i] = map[string]string{}
		for _, suffix := range []string{"", supply.ManifestSuffix, supply.SBOMSuffix, supply.ProvenanceSuffix} {
			data, err := os.ReadFile(bin + suffix)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && suffix != "" && bytes.Contains(data, []byte(filepath.Dir(wf))) {
				t.Errorf("supply%s contains the build directory", suffix)
			}
			sum := sha256.Sum256(data)
			sums[i]["supply"+suffix] = hex.EncodeToString(sum[:])
		}
	}
	for name, sum := range sums[0] {
		if sums[1][name] != sum {
			t.Errorf("%s differs between builds: %s vs %s", name, sum, sums[1][name])
		} else {
			t.Logf("%s sha256 %s (identical)", name, sum)
		}
	}
}

// Offline: the build resolves everything from the module cache with
// GOPROXY=off, and verification needs no network at all (run in a network
// namespace without interfaces when the machine allows it).
func TestAirGapped(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "-mod=mod")
	bin, pub := signedBuild(t)
	// -r maps the user to root in a new user namespace, so a network
	// namespace needs no privilege where user namespaces are allowed.
	unshare := testtool.Command(t, "unshare")
	if code, out := exe(t, nil, unshare, "-rn", "true"); code != 0 {
		testtool.Missing(t, "cannot create a network namespace here (unshare -rn: %s); the GOPROXY=off build above passed", strings.TrimSpace(out))
	}
	kilnExe := builtKiln(t)
	if code, out := exe(t, nil, unshare, "-rn", kilnExe, "verify", bin, "--key", pub); code != cli.ExitOK || !strings.Contains(out, "verified") {
		t.Fatalf("kiln verify without network: exit %d\n%s", code, out)
	}
	if code, out := exe(t, nil, unshare, "-rn", bin, "verify"); code != cli.ExitOK {
		t.Fatalf("sealed verify without network: exit %d\n%s", code, out)
	}
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"who":"air"}`), 0o644)
	if code, out := exe(t, nil, unshare, "-rn", bin, "--input", in); code != cli.ExitOK || !strings.Contains(out, "greets air") {
		t.Fatalf("sealed run without network: exit %d\n%s", code, out)
	}
}

// Signed workflow inputs through every command that loads a workflow:
// check, gen, build and run verify WORKFLOW.toml.sig (and the child's)
// before validating, and refuse a changed file with exit 5.
func TestSignedWorkflowCommands(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "")
	wf := copySupplyWorkflow(t)
	dir := filepath.Dir(wf)
	child := filepath.Join(dir, "child", "wrap.toml")
	prefix := filepath.Join(t.TempDir(), "wf")
	if code, _, errOut := supplyRun(t, "keygen", "--ed25519", "--output-key-prefix", prefix); code != cli.ExitOK {
		t.Fatal(errOut)
	}
	pin := []string{"--signing-required", "--signing-key", prefix + ".pub"}
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"who":"ops"}`), 0o644)
	commands := map[string][]string{
		"check": {"check", wf},
		"gen":   {"gen", wf, "-o", filepath.Join(t.TempDir(), "out")},
		"build": {"build", wf, "-o", filepath.Join(t.TempDir(), "bin"), "--kiln-source", kilnRoot(t)},
		"run":   {"run", wf, "--input", in},
	}
	expect := func(t *testing.T, wantCode int, want string) {
		t.Helper()
		for name, args := range commands {
			// kiln check takes flags before its files; run takes them anywhere.
			full := append(append([]string{args[0]}, pin...), args[1:]...)
			code, out, errOut := supplyRun(t, full...)
			if code != wantCode || !strings.Contains(errOut, want) {
				t.Errorf("kiln %s: exit %d, want %d and %q\n%s%s", name, code, wantCode, want, out, errOut)
			}
		}
	}

	t.Run("unsigned", func(t *testing.T) {
		expect(t, cli.ExitFailed, "required but workflow.toml.sig does not exist")
	})
	code, out, errOut := supplyRun(t, "sign-workflow", wf, child, "--key", prefix+".key")
	if code != cli.ExitOK || !strings.Contains(out, "wrote "+wf+".sig") || !strings.Contains(out, "wrote "+child+".sig") {
		t.Fatalf("sign-workflow: exit %d\n%s%s", code, out, errOut)
	}
	t.Run("signed", func(t *testing.T) {
		expect(t, cli.ExitOK, "")
		// Without the flags the signature is not required, and still fine.
		if code, _, errOut := supplyRun(t, "check", wf); code != cli.ExitOK {
			t.Fatalf("check without flags: %s", errOut)
		}
	})
	t.Run("child changed", func(t *testing.T) {
		data, _ := os.ReadFile(child)
		os.WriteFile(child, bytes.Replace(data, []byte("[{{rendered}}]"), []byte("<{{rendered}}>"), 1), 0o644)
		defer os.WriteFile(child, data, 0o644)
		expect(t, cli.ExitFailed, child+": signature: wrap.toml.sig does not verify with the key from --signing-key")
	})
	t.Run("environment", func(t *testing.T) {
		os.Remove(child + ".sig")
		t.Setenv("KILN_SIGNING_REQUIRED", "true")
		t.Setenv("KILN_SIGNING_KEY", prefix+".pub")
		code, _, errOut := supplyRun(t, "check", wf)
		if code != cli.ExitFailed || !strings.Contains(errOut, "wrap.toml.sig does not exist") {
			t.Fatalf("KILN_SIGNING_REQUIRED: exit %d: %s", code, errOut)
		}
	})
}

func TestSupplyUsageErrors(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "right-pw-6c1")
	dir := t.TempDir()
	prefix := filepath.Join(dir, "cosign")
	if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", prefix); code != cli.ExitOK {
		t.Fatal(errOut)
	}
	blob := filepath.Join(dir, "blob")
	os.WriteFile(blob, []byte("not a binary"), 0o644)
	cases := []struct {
		args []string
		env  string // COSIGN_PASSWORD, when not the right one
		code int
		want string
	}{
		{[]string{"sign", blob}, "", cli.ExitUsage, "usage: kiln sign"},
		{[]string{"sign", blob, "--key", prefix + ".pub"}, "", cli.ExitUsage, "cosign.pub"},
		{[]string{"sign", blob, "--key", prefix + ".key"}, "bad-pw-93f", cli.ExitUsage, "cannot decrypt (wrong COSIGN_PASSWORD?)"},
		{[]string{"sign", filepath.Join(dir, "missing"), "--key", prefix + ".key"}, "", cli.ExitFailed, "missing"},
		{[]string{"verify", blob}, "", cli.ExitUsage, "usage: kiln verify"},
		{[]string{"verify", blob, "--key", prefix + ".key"}, "", cli.ExitUsage, "public key"},
		{[]string{"verify", filepath.Join(dir, "missing"), "--key", prefix + ".pub"}, "", cli.ExitUsage, "not a readable file"},
		{[]string{"verify", blob, "--key", prefix + ".pub"}, "", cli.ExitFailed, "blob: signature: no signature"},
		{[]string{"sign-workflow", blob, "--key", prefix + ".key"}, "", cli.ExitUsage, "workflow signatures use Ed25519 keys"},
		{[]string{"keygen", "extra"}, "", cli.ExitUsage, "usage: kiln keygen"},
	}
	for _, tc := range cases {
		if tc.env != "" {
			t.Setenv("COSIGN_PASSWORD", tc.env)
		}
		code, out, errOut := supplyRun(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("kiln %s: exit %d, want %d and %q\n%s%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out, errOut)
		}
		if strings.Contains(out+errOut, "right-pw-6c1") || strings.Contains(out+errOut, "bad-pw-93f") {
			t.Errorf("kiln %s: output mentions a password:\n%s%s", strings.Join(tc.args, " "), out, errOut)
		}
		t.Setenv("COSIGN_PASSWORD", "right-pw-6c1")
	}
}
