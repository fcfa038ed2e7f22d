package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/deploy"
)

func TestReadFindsEmbeddedParts(t *testing.T) {
	s, sp := spec(t, "webhook")
	if s.Workflow.Name != "webhook" || len(s.Workflow.HTTPRoutes) != 1 {
		t.Fatalf("workflow source not decoded: %+v", s.Workflow)
	}
	if !strings.HasPrefix(s.ManifestDigest, "sha256:") || len(s.ManifestDigest) != 71 {
		t.Fatalf("manifest digest %q", s.ManifestDigest)
	}
	if sp.Mode != deploy.ModeServe || !sp.Listens || !sp.Durable {
		t.Fatalf("webhook: mode %s listens %v durable %v, want serve, true, true (idempotency_key)", sp.Mode, sp.Listens, sp.Durable)
	}
	if len(sp.Secrets) != 1 || sp.Secrets[0].Key != "GITHUB_WEBHOOK_SECRET" {
		t.Fatalf("secrets %+v", sp.Secrets)
	}
	_, hello := spec(t, "hello")
	if hello.Mode != deploy.ModeOnce || hello.Durable || len(hello.Hosts) != 0 || hello.TLS {
		t.Fatalf("hello spec %+v", hello)
	}
	if len(hello.WritePaths) != 1 || hello.WritePaths[0] != "/tmp/kiln-hello" {
		t.Fatalf("hello write paths %v", hello.WritePaths)
	}
}

// A binary whose embedded workflow source or needs were altered after
// sealing is refused: a deployment is never derived from parts that do
// not hash to the manifest's digests.
func TestReadRefusesAlteredParts(t *testing.T) {
	bin := sealed(t, "hello")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, old, new string }{
		// The write path in the embedded TOML source.
		{"workflow source", `write = ["/tmp/kiln-hello/**"]`, `write = ["/tmp/kiln-HELLO/**"]`},
		// The write path in the embedded effective needs.
		{"needs", `"path":"/tmp/kiln-hello","mode":"rw"`, `"path":"/tmp/kiln-hellO","mode":"rw"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if bytes.Count(data, []byte(c.old)) != 1 {
				t.Fatalf("want exactly one %q in the binary", c.old)
			}
			p := filepath.Join(t.TempDir(), "hello")
			if err := os.WriteFile(p, bytes.Replace(data, []byte(c.old), []byte(c.new), 1), 0o755); err != nil {
				t.Fatal(err)
			}
			_, err := deploy.Read(p)
			if err == nil || !strings.Contains(err.Error(), c.name) {
				t.Fatalf("altered %s: err = %v, want a refusal naming it", c.name, err)
			}
		})
	}
}

func TestReadRefusesNonBinaries(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Read(p); err == nil {
		t.Fatal("a shell script was read as a sealed binary")
	}
}
