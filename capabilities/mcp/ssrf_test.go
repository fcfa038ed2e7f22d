package mcp_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnworks/kiln/capabilities/internal/netguard/netguardtest"
	"github.com/kilnworks/kiln/runtime"
)

// TestURLServerSSRFGuard: a url server's host is named by the workflow,
// so a name resolving to loopback is reached, while a name resolving to
// 0.0.0.0 (the class of the metadata addresses; on Linux a connection to
// it reaches the loopback server) is refused at the dial: the server sees
// no request.
func TestURLServerSSRFGuard(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	var hits atomic.Int64
	// The server takes the test's host names (its DNS rebinding check
	// admits only localhost names).
	mcpServer := server.NewStreamableHTTPServer(newTestServer(rec), server.WithStateful(true), server.WithDisableLocalhostProtection(true))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mcpServer.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	netguardtest.Resolve(t, map[string]string{"mcp.kiln.test": "127.0.0.1", "metadata.kiln.test": "0.0.0.0"})
	args := map[string]any{"args": map[string]any{"message": "guarded"}}

	h := mustHost(t, httpWorkflow("http://mcp.kiln.test:"+port+"/mcp", "echo"), "")
	if rep := h.run(t, "tool", args); rep.Outcome.Status != runtime.StatusCompleted || hits.Load() == 0 {
		t.Fatalf("server by a name resolving to loopback: %+v (hits %d)", rep.Outcome, hits.Load())
	}
	before := hits.Load()

	h = mustHost(t, httpWorkflow("http://metadata.kiln.test:"+port+"/mcp", "echo"), "")
	rep := h.run(t, "tool", args)
	if rep.Outcome.Status == runtime.StatusCompleted ||
		!strings.Contains(rep.Outcome.Reason, "refusing to connect to unspecified (this network) address 0.0.0.0") {
		t.Fatalf("server by a name resolving to 0.0.0.0: %+v", rep.Outcome)
	}
	if n := hits.Load() - before; n != 0 {
		t.Fatalf("the server got %d requests", n)
	}
}
