package mcp_test

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// TestEverythingBehindAuthProxy: the reference server over streamable
// HTTP behind an authenticating reverse proxy on loopback, the way
// production MCP servers sit behind a gateway. The bearer from a
// [[secrets]] entry gets through; a wrong one is refused with a clear
// error, and the secret reaches no sink.
func TestEverythingBehindAuthProxy(t *testing.T) {
	const good, bad = "proxy-token-6e1d0a93", "proxy-token-wrong-22c7"
	target, err := url.Parse("http://" + startEverythingHTTP(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del("Authorization") // the gateway consumes it
		},
		FlushInterval: -1, // stream SSE responses as they come
	}
	gate := &bearerGate{want: constant(good), h: proxy}
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	src := headerWorkflow(ts.URL+"/mcp", `Authorization = "Bearer {{secret:MCP_TOKEN}}"`)
	args := map[string]any{"args": map[string]any{"message": "through the proxy"}}

	t.Setenv("MCP_TOKEN", good)
	h := mustHost(t, src, "")
	rep := h.run(t, "tool", args)
	if rep.Outcome.Status != runtime.StatusCompleted || !strings.Contains(jsonText(output(t, rep, "call")["content"]), "Echo: through the proxy") {
		t.Fatalf("right bearer: %+v", rep.Outcome)
	}

	t.Setenv("MCP_TOKEN", bad)
	h = mustHost(t, src, "")
	rep = h.run(t, "tool", args)
	if rep.Outcome.Status == runtime.StatusCompleted || !strings.Contains(rep.Outcome.Reason, "refused the credentials (HTTP 401") {
		t.Fatalf("wrong bearer: %+v", rep.Outcome)
	}
	for what, sink := range map[string]string{"outcome": jsonText(rep.Outcome), "trace": jsonText(rep.Trace), "audit": h.audit.String()} {
		if strings.Contains(sink, bad) {
			t.Errorf("the secret is in the %s: %s", what, sink)
		}
	}
}
