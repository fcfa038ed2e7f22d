package supply

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// repoRoot is the kiln checkout holding this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// cosignPath returns the pinned cosign CLI that `make tools` installs, or
// skips the test saying how to get it.
func cosignPath(t testing.TB) string {
	t.Helper()
	return testtool.CacheBin(t, "cosign")
}

var (
	sampleOnce     sync.Once
	sampleBin      string
	sampleErr      string
	sampleManifest []byte // the manifest JSON the sample embeds
)

// sampleBinary returns a copy (in a fresh temp dir) of a small Go program
// built like a sealed binary: -trimpath, stripped, tags kiln_custom,kiln_fs,
// linking one third-party module so its build info lists a dependency.
func sampleBinary(t testing.TB) string {
	t.Helper()
	sampleOnce.Do(func() { sampleBin, sampleErr = buildSample(repoRoot(t)) })
	if sampleErr != "" {
		t.Fatal(sampleErr)
	}
	data, err := os.ReadFile(sampleBin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "hello")
	if err := os.WriteFile(out, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func buildSample(root string) (string, string) {
	dir, err := testtool.ProcessDir("kiln-supply-sample-")
	if err != nil {
		return "", err.Error()
	}
	sampleDirs = append(sampleDirs, dir)
	var sum bytes.Buffer
	f, err := os.Open(filepath.Join(root, "go.sum"))
	if err != nil {
		return "", err.Error()
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "github.com/BurntSushi/toml ") {
			sum.WriteString(sc.Text() + "\n")
		}
	}
	f.Close()
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "", "go env GOVERSION: " + err.Error()
	}
	m := &manifest.Manifest{
		Schema:      manifest.Schema,
		Workflow:    manifest.Workflow{Name: "hello", Digest: strings.Repeat("ab", 32)},
		KilnVersion: "test",
		GoVersion:   strings.TrimSpace(string(goVersion)),
		BuildTags:   []string{"kiln_custom", "kiln_fs"},
		NodeKinds:   []string{"read_file", "terminate"},
		Inputs:      []manifest.Input{{Path: "workflow.toml", Kind: "workflow", SHA256: strings.Repeat("ab", 32)}},
	}
	sampleManifest, err = manifest.Encode(m)
	if err != nil {
		return "", err.Error()
	}
	files := map[string]string{
		"go.mod": "module example.com/sealed\n\ngo 1.26\n\nrequire github.com/BurntSushi/toml v1.6.0\n",
		"go.sum": sum.String(),
		"main.go": `package main

import (
	"fmt"

	"github.com/BurntSushi/toml"
)

var manifestBlob = ` + strconv.Quote(manifest.Wrap(sampleManifest)) + `

func main() {
	var v map[string]any
	_, err := toml.Decode("name = \"hello\"", &v)
	fmt.Println(v["name"], err, len(manifestBlob))
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return "", err.Error()
		}
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=",
		"-tags", "kiln_custom,kiln_fs", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "building the sample binary: " + err.Error() + "\n" + string(out)
	}
	return bin, ""
}

var sampleDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range sampleDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// writeArtifacts writes the sample's manifest, SBOM and provenance the way
// kiln build does.
func writeArtifacts(t testing.TB, bin string) *manifest.Manifest {
	t.Helper()
	m, err := WriteArtifacts(bin, sampleManifest)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// editManifest rewrites BIN.manifest.json through edit (not re-signed).
func editManifest(t testing.TB, bin string, edit func(*manifest.Manifest)) {
	t.Helper()
	data, err := os.ReadFile(bin + ManifestSuffix)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if data, err = manifest.Encode(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin+ManifestSuffix, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeKeyPair writes a cosign-format key pair into dir and returns the paths.
func writeKeyPair(t testing.TB, dir, prefix string, password []byte) (key, pub string) {
	t.Helper()
	priv, pubPEM, err := GenerateKeyPair(password)
	if err != nil {
		t.Fatal(err)
	}
	key, pub = filepath.Join(dir, prefix+".key"), filepath.Join(dir, prefix+".pub")
	if err := os.WriteFile(key, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return key, pub
}

var sharedKeyPair struct {
	once      sync.Once
	priv, pub []byte
	signer    signature.Signer
	err       error
}

// sharedKey writes one process-wide cosign key pair (empty password) into
// dir as cosign.key / cosign.pub and returns its signer and the public key
// path: scrypt makes every fresh key cost about half a second.
func sharedKey(t testing.TB, dir string) (signature.Signer, string) {
	t.Helper()
	k := &sharedKeyPair
	k.once.Do(func() {
		if k.priv, k.pub, k.err = GenerateKeyPair(nil); k.err != nil {
			return
		}
		f := filepath.Join(t.TempDir(), "k")
		if k.err = os.WriteFile(f, k.priv, 0o600); k.err == nil {
			k.signer, k.err = LoadSigner(f, nil)
		}
	})
	if k.err != nil {
		t.Fatal(k.err)
	}
	pub := filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(filepath.Join(dir, "cosign.key"), k.priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, k.pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return k.signer, pub
}
