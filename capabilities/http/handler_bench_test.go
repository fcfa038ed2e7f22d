package http

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

const benchWorkflow = `
name = "bench"
[[start_nodes]]
name = "main"
[[nodes]]
id = "ok"
type = "respond"
body_template = '{"ok":true,"event":"{{event}}"}'
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
`

// BenchmarkServeRoute measures the handler path of a one-node route
// without the network: parse, run, reply. Audit events are discarded.
func BenchmarkServeRoute(b *testing.B) {
	benchServeRoute(b, newHost(b, benchWorkflow, setup{stateDir: "-"}))
}

// BenchmarkServeRouteAudited is BenchmarkServeRoute with the audit logger
// a user gets by default (text, level info, redacting) writing to a real
// file: every run logs workflow.started and workflow.completed.
func BenchmarkServeRouteAudited(b *testing.B) {
	h := newHost(b, benchWorkflow, setup{stateDir: "-"})
	path := filepath.Join(b.TempDir(), "audit.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	audit, closer, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: f})
	if err != nil {
		b.Fatal(err)
	}
	defer closer.Close()
	h.Engine.Audit = audit
	benchServeRoute(b, h)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if n := bytes.Count(data, []byte("msg=workflow.completed")); n < b.N {
		b.Fatalf("%d workflow.completed audit lines for %d runs", n, b.N)
	}
}

// BenchmarkServeRouteAuditedSecrets is BenchmarkServeRouteAudited with
// secrets registered for redaction, as a route with auth has: every reply
// and audit record is checked for them. It runs last: registered secrets
// stay registered for the rest of the process.
func BenchmarkServeRouteAuditedSecrets(b *testing.B) {
	runtime.RedactValue("bench-hmac-secret-value")
	runtime.RedactValue(`bench-token-with-"quote"`) // two forms: raw and JSON-escaped
	BenchmarkServeRouteAudited(b)
}

func benchServeRoute(b *testing.B, h *runtime.Host) {
	s, err := New(h, Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/hook", strings.NewReader(`{"event":"ping","n":1}`))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != 200 || w.Body.String() != `{"ok":true,"event":"ping"}` {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
