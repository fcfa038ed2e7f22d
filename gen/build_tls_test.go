package gen_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// TestTLSServingLinkedOnlyWhenDeclared: the TLS server (handshakes, key
// parsing, signatures: about 370 KB, and 170 KiB of a serve binary's
// idle RSS) is linked only into a binary whose workflow declares
// [server.tls]; one that does links it.
func TestTLSServingLinkedOnlyWhenDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two sealed binaries")
	}
	const handshake = "crypto/tls.(*serverHandshakeStateTLS13).handshake"
	build := func(name, toml string) map[string]bool {
		t.Helper()
		dir := t.TempDir()
		wf := filepath.Join(dir, "workflow.toml")
		writeFile(t, wf, []byte(toml))
		res, err := gen.Build(context.Background(), gen.BuildOptions{Workflow: wf, Output: filepath.Join(dir, name), KilnSource: repoRoot(t)})
		if err != nil {
			t.Fatal(err)
		}
		return funcNames(t, res.Binary)
	}
	if build("plain", serveWorkflow)[handshake] {
		t.Errorf("a serve binary without [server.tls] links %s", handshake)
	}
	withTLS := serveWorkflow + `
[server.tls]
cert_file = "server.pem"
key_file = "server.key"
`
	if !build("tls", withTLS)[handshake] {
		t.Errorf("positive control: a serve binary with [server.tls] does not link %s", handshake)
	}
}
