package mcp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime"
)

// bearerGate serves h to requests carrying "Bearer <want()>" (or a token
// accept approves) and answers
// 401 otherwise; it records every Authorization header it saw.
type bearerGate struct {
	want   func() string
	accept func(token string) bool // replaces want when set
	// challenge is the WWW-Authenticate of a 401 (default: invalid_token).
	challenge string
	h         http.Handler

	mu   sync.Mutex
	seen []string
}

func (g *bearerGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("Authorization")
	g.mu.Lock()
	g.seen = append(g.seen, got)
	g.mu.Unlock()
	ok := false
	if g.accept != nil {
		tok, found := strings.CutPrefix(got, "Bearer ")
		ok = found && g.accept(tok)
	} else {
		ok = got == "Bearer "+g.want()
	}
	if !ok {
		challenge := g.challenge
		if challenge == "" {
			challenge = `Bearer error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	g.h.ServeHTTP(w, r)
}

func (g *bearerGate) authorizations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.seen...)
}

// gatedServer serves the test MCP server on loopback behind a bearer gate.
func gatedServer(t *testing.T, want func() string) (*bearerGate, string) {
	t.Helper()
	g := &bearerGate{want: want, h: statefulHTTP(newTestServer(filepath.Join(t.TempDir(), "calls.jsonl")))}
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	return g, ts.URL + "/mcp"
}

func constant(s string) func() string { return func() string { return s } }

// newAuthPool builds a pool for one url server; secrets come from vals.
func newAuthPool(t *testing.T, s kmcp.Server, vals map[string]string) (*kmcp.Pool, *firetest.Buffer) {
	t.Helper()
	audit := &firetest.Buffer{}
	p := kmcp.NewPool([]kmcp.Server{s}, kmcp.Options{
		Secret: func(name string) (string, error) {
			if v, ok := vals[name]; ok {
				return v, nil
			}
			return "", fmt.Errorf("secret %s is not set", name)
		},
		Audit: slog.New(slog.NewTextHandler(audit, nil)),
	})
	t.Cleanup(func() { _ = p.Close() })
	return p, audit
}

func callEcho(p *kmcp.Pool, server string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.CallTool(ctx, server, "echo", map[string]any{"message": "hi"})
}

// TestHeaderBearerFromSecret: a bearer header built from a secret reaches
// an authenticating server; a wrong one fails with an error that says the
// server refused the credentials and does not contain them.
func TestHeaderBearerFromSecret(t *testing.T) {
	const good, bad = "tok-right-7c1f9e", "tok-wrong-52ab0d"
	gate, url := gatedServer(t, constant(good))
	s := kmcp.Server{Name: "web", URL: url, AllowTools: []string{"echo"},
		Headers: map[string]string{"Authorization": "Bearer {{secret:MCP_TOKEN}}", "X-Client": "kiln-test"}}

	p, _ := newAuthPool(t, s, map[string]string{"MCP_TOKEN": good})
	res, err := callEcho(p, "web")
	if err != nil || !strings.Contains(jsonText(res), "echo: hi") {
		t.Fatalf("right bearer: %v %v", res, err)
	}

	p, audit := newAuthPool(t, s, map[string]string{"MCP_TOKEN": bad})
	_, err = callEcho(p, "web")
	if err == nil {
		t.Fatal("a wrong bearer was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "401") || !strings.Contains(msg, "web") {
		t.Errorf("the error does not say the server refused: %s", msg)
	}
	for _, sink := range []string{msg, audit.String()} {
		if strings.Contains(sink, bad) {
			t.Errorf("the secret leaked: %s", sink)
		}
	}
	if !strings.Contains(strings.Join(gate.authorizations(), "\n"), "Bearer "+bad) {
		t.Errorf("the server never saw the declared header: %q", gate.authorizations())
	}

	// A secret value that would split the header is refused before sending.
	seen := len(gate.authorizations())
	p, _ = newAuthPool(t, s, map[string]string{"MCP_TOKEN": good + "\r\nX-Injected: 1"})
	if _, err = callEcho(p, "web"); err == nil || !strings.Contains(err.Error(), "secret MCP_TOKEN contains CR, LF or NUL") {
		t.Errorf("a secret with CR LF: %v", err)
	}
	if n := len(gate.authorizations()); n != seen {
		t.Errorf("the server got %d requests with a CR LF secret", n-seen)
	}
}

// TestHeadersStayOnTheServersOrigin: a redirect to another origin is
// followed without the declared headers.
func TestHeadersStayOnTheServersOrigin(t *testing.T) {
	const token = "tok-origin-93d2aa"
	var mu sync.Mutex
	var elsewhere []string
	mcpServer := statefulHTTP(newTestServer(filepath.Join(t.TempDir(), "calls.jsonl")))
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
		mcpServer.ServeHTTP(w, r)
	}))
	t.Cleanup(other.Close)
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(first.Close)

	s := kmcp.Server{Name: "web", URL: first.URL + "/mcp", AllowTools: []string{"echo"},
		Headers: map[string]string{"Authorization": "Bearer {{secret:MCP_TOKEN}}"}}
	p, _ := newAuthPool(t, s, map[string]string{"MCP_TOKEN": token})
	_, _ = callEcho(p, "web") // whether the session survives the hop does not matter here
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) == 0 {
		t.Fatal("the redirect was not followed; the test proves nothing")
	}
	for _, a := range elsewhere {
		if a != "" {
			t.Fatalf("the other origin received Authorization %q", a)
		}
	}
}

// TestHeaderSecretInWorkflow: headers declared in a workflow reach the
// server, and a wrong secret fails the run with a reason that names the
// server and the refusal but not the secret, in the outcome and the audit
// log.
func TestHeaderSecretInWorkflow(t *testing.T) {
	const good, bad = "tok-wf-right-1d0e77", "tok-wf-wrong-8b3c41"
	_, url := gatedServer(t, constant(good))
	src := headerWorkflow(url, `Authorization = "Bearer {{secret:MCP_TOKEN}}"`)

	t.Setenv("MCP_TOKEN", good)
	h := mustHost(t, src, "")
	if rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "hi"}}); rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("right secret: %+v", rep.Outcome)
	}

	t.Setenv("MCP_TOKEN", bad)
	h = mustHost(t, src, "")
	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "hi"}})
	if rep.Outcome.Status == runtime.StatusCompleted || !strings.Contains(rep.Outcome.Reason, "401") {
		t.Fatalf("wrong secret: %+v", rep.Outcome)
	}
	for what, sink := range map[string]string{"outcome": jsonText(rep.Outcome), "trace": jsonText(rep.Trace), "audit": h.audit.String()} {
		if strings.Contains(sink, bad) {
			t.Errorf("the secret is in the %s: %s", what, sink)
		}
	}
}

// TestHeaderValidation: CR, LF or NUL, a placeholder other than
// {{secret:NAME}}, a header the client owns and headers on a stdio
// server are refused before anything starts.
func TestHeaderValidation(t *testing.T) {
	for _, tc := range []struct{ headers, want string }{
		{`Authorization = "Bearer x\r\nX-Evil: 1"`, "CR, LF or NUL"},
		{`Authorization = "Bearer x\u0000"`, "CR, LF or NUL"},
		{`Authorization = "Bearer {{trigger.token}}"`, "{{secret:NAME}} placeholders only"},
		{`"Mcp-Session-Id" = "fixed"`, "set by the MCP client"},
		{`"Bad Name" = "x"`, "not a valid HTTP field name"},
	} {
		_, err := newHost(t, headerWorkflow("http://127.0.0.1:9/mcp", tc.headers))
		if err == nil {
			h, _ := newHost(t, headerWorkflow("http://127.0.0.1:9/mcp", tc.headers))
			err = kmcp.Validate(h.Program.Workflow)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.headers, err, tc.want)
		}
	}
}

func headerWorkflow(url, headers string) string {
	return fmt.Sprintf(`
name = "mcp-headers"

[[start_nodes]]
name = "tool"
source = "manual"
entry_node = "call"

[[secrets]]
name = "MCP_TOKEN"
source = "env"
var = "MCP_TOKEN"

[[mcp_servers]]
name = "web"
url = %q
allow_tools = ["echo"]

[mcp_servers.headers]
%s

[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
args_from = "trigger.args"
`, url, headers)
}
