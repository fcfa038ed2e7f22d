package gen

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type wfKey struct {
	priv   ed25519.PrivateKey
	pubPEM string
}

func newWFKey(t *testing.T) wfKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return wfKey{priv, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func sign(t *testing.T, path string, k wfKey) {
	t.Helper()
	if _, err := SignWorkflow(path, k.priv); err != nil {
		t.Fatal(err)
	}
}

const terminateOnly = `
[[nodes]]
id = "done"
type = "terminate"
`

// signedWorkflow writes dir/workflow.toml requiring a signature with the
// key in dir/wf.pub, and signs it.
func signedWorkflow(t *testing.T, k wfKey) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "wf.pub"), k.pubPEM)
	p := writeFile(t, filepath.Join(dir, "workflow.toml"), `name = "signed"

[signing]
required = true
public_key_file = "wf.pub"
algorithm = "ed25519"
`+terminateOnly)
	sign(t, p, k)
	return p
}

func wantSigErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	var se *SignatureError
	if !errors.As(err, &se) {
		t.Fatalf("got %v (%T), want a *SignatureError", err, err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

func TestSignedWorkflowLoads(t *testing.T) {
	k := newWFKey(t)
	p := signedWorkflow(t, k)
	sig, _ := os.ReadFile(p + ".sig")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig)))
	if err != nil || len(raw) != ed25519.SignatureSize {
		t.Fatalf(".sig is not base64 of 64 bytes: %q", sig)
	}
	wf, err := Load(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wf.Name != "signed" {
		t.Fatalf("name %q", wf.Name)
	}
	// The key file is found beside the workflow from any working directory.
	t.Chdir(t.TempDir())
	if _, err := Load(p, LoadOptions{}); err != nil {
		t.Fatalf("from another directory: %v", err)
	}
}

func TestWorkflowSignatureRefusals(t *testing.T) {
	k, other := newWFKey(t), newWFKey(t)
	cases := []struct {
		name string
		edit func(t *testing.T, p string)
		want []string
	}{
		{"one byte changed", func(t *testing.T, p string) {
			data, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(data), `"signed"`, `"signeD"`, 1)), 0o644)
		}, []string{"workflow.toml.sig does not verify with the key from wf.pub", "changed after signing"}},
		{"signature missing", func(t *testing.T, p string) { os.Remove(p + ".sig") },
			[]string{"required but workflow.toml.sig does not exist"}},
		{"signature garbage", func(t *testing.T, p string) { os.WriteFile(p+".sig", []byte("bm90IGEgc2lnbmF0dXJl\n"), 0o644) },
			[]string{"not the base64 of a 64-byte Ed25519 signature"}},
		{"signature flipped", func(t *testing.T, p string) {
			data, _ := os.ReadFile(p + ".sig")
			raw, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
			raw[5] ^= 1
			os.WriteFile(p+".sig", []byte(base64.StdEncoding.EncodeToString(raw)), 0o644)
		}, []string{"does not verify"}},
		{"signed by another key", func(t *testing.T, p string) { sign(t, p, other) },
			[]string{"does not verify with the key from wf.pub"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := signedWorkflow(t, k)
			tc.edit(t, p)
			_, err := Load(p, LoadOptions{})
			wantSigErr(t, err, append(tc.want, p)...)
		})
	}
}

// The signature is checked before validation: an invalid workflow whose
// signature is wrong reports the signature, not its issues.
func TestSignatureCheckedBeforeValidation(t *testing.T) {
	k := newWFKey(t)
	dir := t.TempDir()
	p := writeFile(t, filepath.Join(dir, "w.toml"), "name = \"bad\"\n[signing]\nrequired = true\npublic_key_pem = '''\n"+k.pubPEM+"'''\n"+`
[[nodes]]
id = "x"
type = "no_such_kind"
`)
	_, err := Load(p, LoadOptions{})
	wantSigErr(t, err, "does not exist")
}

func TestInlineKeyAndOptionalSignature(t *testing.T) {
	k := newWFKey(t)
	dir := t.TempDir()
	body := "name = \"inline\"\n[signing]\nrequired = false\npublic_key_pem = '''\n" + k.pubPEM + "'''\n" + terminateOnly
	p := writeFile(t, filepath.Join(dir, "w.toml"), body)
	// Not required and unsigned: loads.
	if _, err := Load(p, LoadOptions{}); err != nil {
		t.Fatalf("unsigned, not required: %v", err)
	}
	// Not required but signed wrongly: a bad signature is never ignored.
	sign(t, p, newWFKey(t))
	_, err := Load(p, LoadOptions{})
	wantSigErr(t, err, "[signing] public_key_pem")
	sign(t, p, k)
	if _, err := Load(p, LoadOptions{}); err != nil {
		t.Fatalf("signed with the inline key: %v", err)
	}
}

func TestSigningRequiredOption(t *testing.T) {
	k := newWFKey(t)
	dir := t.TempDir()
	p := writeFile(t, filepath.Join(dir, "w.toml"), "name = \"plain\"\n"+terminateOnly)
	if _, err := Load(p, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, LoadOptions{SigningRequired: true})
	wantSigErr(t, err, "required but w.toml.sig does not exist")

	sign(t, p, k)
	_, err = Load(p, LoadOptions{SigningRequired: true})
	wantSigErr(t, err, "no public key", "--signing-key")
	if _, err := Load(p, LoadOptions{SigningRequired: true, SigningKey: []byte(k.pubPEM)}); err != nil {
		t.Fatalf("signed, key pinned: %v", err)
	}
	_, err = Load(p, LoadOptions{SigningRequired: true, SigningKey: []byte(newWFKey(t).pubPEM)})
	wantSigErr(t, err, "does not verify with the key from --signing-key")

	var pe *ParseError
	if _, err := Load(p, LoadOptions{SigningKey: []byte("nope")}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "--signing-key") {
		t.Fatalf("bad --signing-key: %v", err)
	}
}

// A pinned operator key beats the key a (rewritten) file declares: an
// attacker who replaces the file, its key and its signature is refused.
func TestPinnedKeyOverridesDeclaredKey(t *testing.T) {
	legit, attacker := newWFKey(t), newWFKey(t)
	dir := t.TempDir()
	p := writeFile(t, filepath.Join(dir, "w.toml"), "name = \"evil\"\n[signing]\nrequired = true\npublic_key_pem = '''\n"+attacker.pubPEM+"'''\n"+terminateOnly)
	sign(t, p, attacker)
	if _, err := Load(p, LoadOptions{}); err != nil {
		t.Fatalf("self-consistent file should load without a pinned key: %v", err)
	}
	_, err := Load(p, LoadOptions{SigningKey: []byte(legit.pubPEM)})
	wantSigErr(t, err, "--signing-key")
}

func TestSigningBlockErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"algorithm = \"rsa\"": "signing.algorithm",
		"public_key_file = \"a.pub\"\npublic_key_pem = \"x\"": "not both",
		"public_key_file = \"missing.pub\"":                   "signing.public_key_file",
		"public_key_pem = \"not pem\"":                        "signing.public_key_pem",
	}
	for body, want := range cases {
		p := writeFile(t, filepath.Join(dir, "w.toml"), "name = \"x\"\n[signing]\nrequired = true\n"+body+"\n"+terminateOnly)
		_, err := Load(p, LoadOptions{})
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a ParseError containing %q", body, err, want)
		}
	}
}

// A parent that requires signatures requires them of its children, with
// its key unless a child declares its own.
func TestChildWorkflowSignatures(t *testing.T) {
	k := newWFKey(t)
	setup := func(t *testing.T, childBody string) (parent, child string) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "wf.pub"), k.pubPEM)
		parent = writeFile(t, filepath.Join(dir, "parent.toml"), `name = "parent"
[signing]
required = true
public_key_file = "wf.pub"

[[nodes]]
id = "sub"
type = "call"
workflow = "sub/child.toml"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "sub"
to = "done"
`)
		sign(t, parent, k)
		child = writeFile(t, filepath.Join(dir, "sub", "child.toml"), childBody)
		return parent, child
	}
	plainChild := "name = \"child\"\n" + terminateOnly

	t.Run("unsigned child refused", func(t *testing.T) {
		parent, child := setup(t, plainChild)
		_, err := Load(parent, LoadOptions{})
		wantSigErr(t, err, child, "required but child.toml.sig does not exist")
	})
	t.Run("child signed with the parent's key", func(t *testing.T) {
		parent, child := setup(t, plainChild)
		sign(t, child, k)
		wf, err := Load(parent, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if wf.Children["sub/child.toml"] == nil {
			t.Fatal("child not loaded")
		}
	})
	t.Run("tampered child refused", func(t *testing.T) {
		parent, child := setup(t, plainChild)
		sign(t, child, k)
		os.WriteFile(child, []byte(strings.Replace(plainChild, "child", "chilD", 1)), 0o644)
		_, err := Load(parent, LoadOptions{})
		wantSigErr(t, err, child, "does not verify with the key from wf.pub (of parent.toml)")
	})
	t.Run("child with its own key", func(t *testing.T) {
		own := newWFKey(t)
		body := "name = \"child\"\n[signing]\npublic_key_pem = '''\n" + own.pubPEM + "'''\n" + terminateOnly
		parent, child := setup(t, body)
		sign(t, child, k) // the parent's key is not the child's
		_, err := Load(parent, LoadOptions{})
		wantSigErr(t, err, "[signing] public_key_pem")
		sign(t, child, own)
		if _, err := Load(parent, LoadOptions{}); err != nil {
			t.Fatalf("child signed with its own key: %v", err)
		}
	})
	t.Run("unsigned parent, --signing-required reaches the child", func(t *testing.T) {
		dir := t.TempDir()
		parent := writeFile(t, filepath.Join(dir, "p.toml"), `name = "p"
[[nodes]]
id = "sub"
type = "call"
workflow = "c.toml"
[[nodes]]
id = "done"
type = "terminate"
[[edges]]
from = "sub"
to = "done"
`)
		child := writeFile(t, filepath.Join(dir, "c.toml"), plainChild)
		sign(t, parent, k)
		opts := LoadOptions{SigningRequired: true, SigningKey: []byte(k.pubPEM)}
		_, err := Load(parent, opts)
		wantSigErr(t, err, child, "does not exist")
		sign(t, child, k)
		if _, err := Load(parent, opts); err != nil {
			t.Fatal(err)
		}
	})
}
