package gen_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// TestRouteSupportLinkedOnlyWhenDeclared: the routes family's optional
// parts are linked only into a binary whose workflow declares them (the
// TLS server: handshakes, key parsing, signatures, about 370 KB; async
// routes with GET /v1/runs, the run store and resuming at start; keyed
// routes with the claim store; each built-in auth kind); one that declares
// them links them.
func TestRouteSupportLinkedOnlyWhenDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two sealed binaries")
	}
	parts := map[string]string{ // a function of each part -> what declares it
		"crypto/tls.(*serverHandshakeStateTLS13).handshake":              "[server.tls]",
		"github.com/kilnworks/kiln/capabilities/http.(*Server).runAsync": `reply = "async"`,
		"github.com/kilnworks/kiln/runtime.(*FileRuns).PutRun":           `reply = "async"`,
		"github.com/kilnworks/kiln/capabilities/http.idempotencyKey":     "idempotency_key",
		"github.com/kilnworks/kiln/runtime.(*FileClaims).Begin":          "idempotency_key",
		"github.com/kilnworks/kiln/capabilities/http.newBearer":          `auth = "bearer"`,
	}
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
	plain := build("plain", serveWorkflow)
	for fn, decl := range parts {
		if plain[fn] {
			t.Errorf("a serve binary without %s links %s", decl, fn)
		}
	}
	declared := build("declared", serveWorkflow+`
[[http_routes]]
method = "POST"
path = "/async"
start_node = "main"
reply = "async"
idempotency_key = "body_sha256"
auth = "bearer:ci"

[auth.bearer.ci]
tokens_env = "CI_TOKENS"

[server.tls]
cert_file = "server.pem"
key_file = "server.key"
`)
	for fn, decl := range parts {
		if !declared[fn] {
			t.Errorf("positive control: a serve binary with %s does not link %s", decl, fn)
		}
	}
	// Only the auth kinds its routes use.
	for _, fn := range []string{"newBasic", "newHMAC", "newMTLS"} {
		if fn = "github.com/kilnworks/kiln/capabilities/http." + fn; plain[fn] || declared[fn] {
			t.Errorf("a serve binary whose routes do not use it links %s", fn)
		}
	}
}
