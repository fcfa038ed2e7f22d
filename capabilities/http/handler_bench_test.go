package http

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkServeRoute measures the handler path of a one-node route
// without the network: parse, run, reply.
func BenchmarkServeRoute(b *testing.B) {
	h := newHost(b, `
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
`, setup{stateDir: "-"})
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
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
