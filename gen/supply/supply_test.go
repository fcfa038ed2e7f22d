package supply

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/manifest"
)

func TestKeyPairIsCosignFormatAndPasswordProtected(t *testing.T) {
	dir := t.TempDir()
	key, pub := writeKeyPair(t, dir, "cosign", []byte("s3cret"))
	data, _ := os.ReadFile(key)
	if !bytes.HasPrefix(data, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) {
		t.Fatalf("private key is not cosign's encrypted PEM:\n%s", data)
	}
	s, err := LoadSigner(key, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.SignMessage(strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), strings.NewReader("payload")); err != nil {
		t.Fatalf("own signature does not verify: %v", err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), strings.NewReader("payloaD")); err == nil {
		t.Fatal("signature verified over different bytes")
	}

	_, err = LoadSigner(key, []byte("wrong"))
	if err == nil || !strings.Contains(err.Error(), PasswordEnv) {
		t.Fatalf("wrong password: got %v, want an error naming %s", err, PasswordEnv)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestEmptyPasswordStillEncrypts(t *testing.T) {
	dir := t.TempDir()
	key, _ := writeKeyPair(t, dir, "k", nil)
	data, _ := os.ReadFile(key)
	if !bytes.Contains(data, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) {
		t.Fatalf("empty password wrote an unencrypted key:\n%s", data)
	}
	if _, err := LoadSigner(key, nil); err != nil {
		t.Fatalf("nil password must mean empty, not skip decryption: %v", err)
	}
	if _, err := LoadSigner(key, []byte("x")); err == nil {
		t.Fatal("a non-empty password opened an empty-password key")
	}
}

func TestLoadSignerKeyKinds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, key any) string {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
		return p
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)

	if _, err := LoadSigner(write("p256.pem", p256), nil); err != nil {
		t.Fatalf("plain PKCS#8 P-256 key refused: %v", err)
	}
	for name, key := range map[string]any{"p384.pem": p384, "rsa.pem": rsaKey} {
		_, err := LoadSigner(write(name, key), nil)
		if err == nil || !strings.Contains(err.Error(), "ECDSA P-256") || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want a refusal naming the file and ECDSA P-256", name, err)
		}
	}
	garbage := filepath.Join(dir, "garbage.key")
	os.WriteFile(garbage, []byte("not a key"), 0o600)
	if _, err := LoadSigner(garbage, nil); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("garbage key: got %v", err)
	}
}

func TestEd25519KeyPair(t *testing.T) {
	dir := t.TempDir()
	priv, pub, err := GenerateEd25519KeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(priv, []byte("ENCRYPTED SIGSTORE PRIVATE KEY")) || !bytes.Contains(pub, []byte("PUBLIC KEY")) {
		t.Fatalf("unexpected PEM:\n%s\n%s", priv, pub)
	}
	p := filepath.Join(dir, "wf.key")
	os.WriteFile(p, priv, 0o600)
	if _, err := LoadEd25519PrivateKey(p, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	// A cosign (ECDSA) key is not a workflow key.
	ck, _ := writeKeyPair(t, dir, "cosign", nil)
	if _, err := LoadEd25519PrivateKey(ck, nil); err == nil || !strings.Contains(err.Error(), "Ed25519") {
		t.Fatalf("ECDSA key accepted as Ed25519: %v", err)
	}
}

// signedSample returns a sample binary with manifest, SBOM and provenance,
// all signed, and the public key path.
func signedSample(t *testing.T) (bin, pub string) {
	t.Helper()
	bin = sampleBinary(t)
	writeArtifacts(t, bin)
	s, pub := sharedKey(t, filepath.Dir(bin))
	files, err := SignArtifacts(s, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Fatalf("signed %d files, want .sig and bundle for binary, manifest, SBOM, provenance: %v", len(files), files)
	}
	return bin, pub
}

func TestVerifyAcceptsSignedArtifacts(t *testing.T) {
	bin, pub := signedSample(t)
	v, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	r := Verify(bin, v)
	var out bytes.Buffer
	r.Write(&out)
	if !r.OK() {
		t.Fatalf("verify failed:\n%s", out.String())
	}
	// Every artifact's signature and every content check ran.
	for _, want := range []string{
		"hello: signature", "hello.manifest.json: signature", "hello.manifest.json: binary digest",
		"hello: build info matches manifest", "hello: embedded manifest matches", "hello.cdx.json: signature", "hello.cdx.json: binary digest",
		"hello.intoto.json: signature", "hello.intoto.json: binary digest",
	} {
		if !strings.Contains(out.String(), "ok   "+want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	flip := func(path string, at func(size int) int) func(t *testing.T, bin string) {
		return func(t *testing.T, bin string) {
			p := bin + path
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			data[at(len(data))] ^= 0x01
			os.WriteFile(p, data, 0o644)
		}
	}
	middle := func(n int) int { return n / 2 }
	cases := []struct {
		name   string
		tamper func(t *testing.T, bin string)
		want   []string // substrings of the first failure
	}{
		{"binary byte", flip("", middle), []string{"hello: signature:", "hello.sig: signature does not match hello"}},
		{"manifest byte", func(t *testing.T, bin string) {
			p := bin + ManifestSuffix
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte(`"go_version": "go`), []byte(`"go_version": "gO`), 1), 0o644)
		}, []string{"hello.manifest.json: signature:", "hello.manifest.json.sig: signature does not match hello.manifest.json"}},
		{"binary signature", func(t *testing.T, bin string) {
			p := bin + SigSuffix
			data, _ := os.ReadFile(p)
			data[10] = map[bool]byte{true: 'B', false: 'A'}[data[10] == 'A']
			os.WriteFile(p, data, 0o644)
		}, []string{"hello: signature:", "hello.sig"}},
		{"bundle signature", func(t *testing.T, bin string) {
			p := bin + BundleSuffix
			data, _ := os.ReadFile(p)
			var doc map[string]any
			json.Unmarshal(data, &doc)
			ms := doc["messageSignature"].(map[string]any)
			sig, err := base64.StdEncoding.DecodeString(ms["signature"].(string))
			if err != nil {
				t.Fatal(err)
			}
			sig[len(sig)-1] ^= 0x01 // the last byte of s
			ms["signature"] = base64.StdEncoding.EncodeToString(sig)
			data, _ = json.Marshal(doc)
			os.WriteFile(p, data, 0o644)
		}, []string{"hello: signature:", "hello.sigstore.json"}},
		{"SBOM byte", flip(SBOMSuffix, middle), []string{"hello.cdx.json: signature:"}},
		{"provenance byte", flip(ProvenanceSuffix, middle), []string{"hello.intoto.json: signature:"}},
		{"manifest unsigned", func(t *testing.T, bin string) {
			os.Remove(bin + ManifestSuffix + SigSuffix)
			os.Remove(bin + ManifestSuffix + BundleSuffix)
		}, []string{"hello.manifest.json: signature:", "no signature"}},
		{"manifest missing", func(t *testing.T, bin string) {
			os.Remove(bin + ManifestSuffix)
		}, []string{"hello.manifest.json"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, pub := signedSample(t)
			tc.tamper(t, bin)
			v, _ := LoadVerifier(pub)
			err := Verify(bin, v).Err()
			if err == nil {
				t.Fatal("tampered artifacts verified")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestVerifyRefusesWrongKey(t *testing.T) {
	bin, _ := signedSample(t)
	_, other := writeKeyPair(t, t.TempDir(), "other", nil)
	v, _ := LoadVerifier(other)
	r := Verify(bin, v)
	if r.OK() {
		t.Fatal("verified with another key")
	}
	for _, c := range r.Checks {
		if c.Name == "signature" && c.Err == nil {
			t.Errorf("%s: signature accepted under the wrong key", c.File)
		}
	}
}

// A manifest that is validly signed but lies about the build is refused:
// the binary's own build info and embedded manifest are the ground truth.
func TestVerifyComparesBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		edit func(*manifest.Manifest)
		want string
	}{
		{"go version", func(m *manifest.Manifest) { m.GoVersion = "go1.20" }, "Go version: manifest says \"go1.20\""},
		{"tags", func(m *manifest.Manifest) { m.BuildTags = append(m.BuildTags, "kiln_shell") }, "build tags"},
		{"module version", func(m *manifest.Manifest) { m.Modules[0].Version = "v0.0.1" }, "module github.com/BurntSushi/toml: manifest says v0.0.1"},
		{"extra module", func(m *manifest.Manifest) {
			m.Modules = append(m.Modules, Module{Path: "example.com/x", Version: "v1.0.0"})
		}, "example.com/x v1.0.0 is in the manifest but not linked"},
		{"hidden module", func(m *manifest.Manifest) { m.Modules = nil }, "github.com/BurntSushi/toml v1.6.0 is linked into the binary but not in the manifest"},
		{"main module", func(m *manifest.Manifest) { m.MainModule.Path = "example.com/other" }, "main module: manifest says example.com/other"},
		{"binary digest", func(m *manifest.Manifest) { m.BinarySHA256 = strings.Repeat("0", 64) }, "binary_sha256 0000"},
		{"node kinds", func(m *manifest.Manifest) { m.NodeKinds = append(m.NodeKinds, "shell_run") }, "differs from the one embedded in it (field node_kinds)"},
		{"inputs", func(m *manifest.Manifest) { m.Inputs[0].SHA256 = strings.Repeat("cd", 32) }, "(field inputs)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin, pub := signedSample(t)
			editManifest(t, bin, tc.edit)
			s, _ := sharedKey(t, t.TempDir())
			if err := SignFile(s, bin+ManifestSuffix); err != nil {
				t.Fatal(err)
			}
			v, _ := LoadVerifier(pub)
			err := Verify(bin, v).Err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteArtifactsManifest(t *testing.T) {
	bin := sampleBinary(t)
	m := writeArtifacts(t, bin)
	sum, _ := FileSHA256(bin)
	if m.BinarySHA256 != sum || m.MainModule == nil || m.MainModule.Path != "example.com/sealed" {
		t.Fatalf("manifest build facts: %+v", m)
	}
	if len(m.Modules) != 1 || m.Modules[0].Path != "github.com/BurntSushi/toml" || m.Modules[0].Version != "v1.6.0" || !strings.HasPrefix(m.Modules[0].Sum, "h1:") {
		t.Fatalf("modules %+v", m.Modules)
	}
	data, _ := os.ReadFile(bin + ManifestSuffix)
	if !bytes.Contains(data, []byte(`"binary_sha256": "`+sum+`"`)) {
		t.Fatalf("BIN.manifest.json lacks the binary digest:\n%s", data)
	}
	// Writing again gives identical bytes for all three documents.
	before := map[string][]byte{}
	for _, f := range Sidecars(bin) {
		before[f], _ = os.ReadFile(f)
	}
	writeArtifacts(t, bin)
	for _, f := range Sidecars(bin) {
		after, _ := os.ReadFile(f)
		if !bytes.Equal(before[f], after) {
			t.Errorf("%s is not deterministic", filepath.Base(f))
		}
	}
	// Signatures of an earlier build at the same path are removed.
	os.WriteFile(bin+SigSuffix, []byte("old"), 0o644)
	os.WriteFile(bin+SBOMSuffix+BundleSuffix, []byte("old"), 0o644)
	writeArtifacts(t, bin)
	for _, f := range []string{bin + SigSuffix, bin + SBOMSuffix + BundleSuffix} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("stale %s kept", filepath.Base(f))
		}
	}
	// Not a sealed binary: no embedded manifest to start from.
	if _, err := WriteArtifacts(bin, []byte("{}")); err == nil {
		t.Error("a manifest without schema was accepted")
	}
}

func TestSBOMFromBuildInfo(t *testing.T) {
	bin := sampleBinary(t)
	facts, err := ReadBuildFacts(bin)
	if err != nil {
		t.Fatal(err)
	}
	if facts.Main.Path != "example.com/sealed" || strings.Join(facts.Tags, ",") != "kiln_custom,kiln_fs" {
		t.Fatalf("unexpected build facts: %+v", facts)
	}
	sum, _ := FileSHA256(bin)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	a, err := SBOM(bin, sum, facts, Tool{Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := SBOM(bin, sum, facts, Tool{Version: "v1.2.3"})
	if !bytes.Equal(a, b) {
		t.Fatal("SBOM is not deterministic")
	}
	var doc map[string]any
	if err := json.Unmarshal(a, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["bomFormat"] != "CycloneDX" || doc["specVersion"] != "1.5" {
		t.Fatalf("not CycloneDX 1.5: %v %v", doc["bomFormat"], doc["specVersion"])
	}
	if _, ok := doc["metadata"].(map[string]any)["timestamp"]; ok {
		t.Error("timestamp written without SOURCE_DATE_EPOCH")
	}
	if !strings.HasPrefix(doc["serialNumber"].(string), "urn:uuid:") {
		t.Errorf("serial %v", doc["serialNumber"])
	}
	comps := doc["components"].([]any)
	if len(comps) != 1 {
		t.Fatalf("components %v", comps)
	}
	toml := comps[0].(map[string]any)
	if toml["purl"] != "pkg:golang/github.com/BurntSushi/toml@v1.6.0" {
		t.Errorf("purl %v", toml["purl"])
	}
	hash := toml["hashes"].([]any)[0].(map[string]any)
	if hash["alg"] != "SHA-256" || len(hash["content"].(string)) != 64 || hash["content"] != SumHex(facts.Modules[0].Sum) {
		t.Errorf("module hash %v (sum %s)", hash, facts.Modules[0].Sum)
	}
	if !bytes.Contains(a, []byte(sum)) {
		t.Error("SBOM does not carry the binary digest")
	}

	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	c, _ := SBOM(bin, sum, facts, Tool{Version: "v1.2.3"})
	if !bytes.Contains(c, []byte(`"timestamp": "2023-11-14T22:13:20Z"`)) {
		t.Errorf("SOURCE_DATE_EPOCH not honoured:\n%s", c)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := SBOM(bin, sum, facts, Tool{Version: "v"}); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("bad SOURCE_DATE_EPOCH: %v", err)
	}
}

func TestProvenanceStatement(t *testing.T) {
	bin := sampleBinary(t)
	facts, _ := ReadBuildFacts(bin)
	sum, _ := FileSHA256(bin)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	info := ProvenanceInfo{Workflow: "hello", KilnVersion: "v1.2.3", Inputs: []manifest.Input{
		{Path: "workflow.toml", Kind: "workflow", SHA256: strings.Repeat("1", 64)},
		{Path: "child/flow.toml", Kind: "child", SHA256: strings.Repeat("2", 64)},
	}}
	a, err := Provenance(bin, sum, facts, info)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Provenance(bin, sum, facts, info)
	if !bytes.Equal(a, b) {
		t.Fatal("provenance is not deterministic")
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string
		Subject       []struct {
			Name   string
			Digest map[string]string
		}
		Predicate struct {
			BuildDefinition struct {
				BuildType            string
				ResolvedDependencies []struct {
					Name, URI string
					Digest    map[string]string
				}
			}
			RunDetails struct {
				Builder  struct{ ID string }
				Metadata any
			}
		}
	}
	if err := json.Unmarshal(a, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Fatalf("types %q %q", st.Type, st.PredicateType)
	}
	if len(st.Subject) != 1 || st.Subject[0].Name != "hello" || st.Subject[0].Digest["sha256"] != sum {
		t.Fatalf("subject %+v", st.Subject)
	}
	deps := st.Predicate.BuildDefinition.ResolvedDependencies
	if len(deps) != 3 || deps[0].Name != "child/flow.toml" || deps[1].Name != "workflow.toml" || deps[1].Digest["sha256"] != strings.Repeat("1", 64) {
		t.Fatalf("resolved dependencies %+v", deps)
	}
	if deps[2].URI != "pkg:golang/github.com/BurntSushi/toml@v1.6.0" {
		t.Errorf("module dependency %+v", deps[2])
	}
	if st.Predicate.BuildDefinition.BuildType != BuildType || st.Predicate.RunDetails.Builder.ID != BuilderID {
		t.Errorf("build type / builder %+v", st.Predicate)
	}
	if st.Predicate.RunDetails.Metadata != nil {
		t.Error("times written without SOURCE_DATE_EPOCH")
	}
	if bytes.Contains(a, []byte(filepath.Dir(bin))) {
		t.Error("provenance contains the build directory")
	}
}
