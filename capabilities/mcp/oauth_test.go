package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/capabilities/secrets"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	clientID     = "kiln-agent"
	clientSecret = "client-secret-4f0c2b9e"
)

// tokenIssuer is an in-process OAuth2 token endpoint (client credentials)
// and the list of tokens the resource server accepts.
type tokenIssuer struct {
	mu      sync.Mutex
	issued  []string
	valid   map[string]bool
	closed  bool // the resource server refuses every token
	expires int  // expires_in of new tokens
}

func (ti *tokenIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" ||
		r.PostForm.Get("client_id") != clientID || r.PostForm.Get("client_secret") != clientSecret {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	ti.mu.Lock()
	tok := fmt.Sprintf("access-%d-%x", len(ti.issued)+1, time.Now().UnixNano())
	ti.issued = append(ti.issued, tok)
	ti.valid[tok] = true
	exp := ti.expires
	ti.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": exp})
}

func (ti *tokenIssuer) accepts(tok string) bool {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return !ti.closed && ti.valid[tok]
}

func (ti *tokenIssuer) fetches() int {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return len(ti.issued)
}

func (ti *tokenIssuer) all() []string {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return append([]string(nil), ti.issued...)
}

func (ti *tokenIssuer) last() string {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.issued[len(ti.issued)-1]
}

func (ti *tokenIssuer) revoke(tok string) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	delete(ti.valid, tok)
}

// oauthServer starts a token endpoint and an MCP server accepting the
// tokens it issued, both on loopback.
func oauthServer(t *testing.T) (*tokenIssuer, string, *bearerGate, string) {
	t.Helper()
	ti := &tokenIssuer{valid: map[string]bool{}, expires: 3600}
	tokens := httptest.NewServer(ti)
	t.Cleanup(tokens.Close)
	gate, url := gatedServer(t, nil)
	gate.accept = ti.accepts
	return ti, tokens.URL + "/token", gate, url
}

// clock is the registry's injected time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// oauthRegistry is the secrets registry with one oauth2 entry, "MCP_OAUTH",
// loaded (the first token fetched) on a test clock.
func oauthRegistry(t *testing.T, tokenURL string) (*secrets.Registry, *clock) {
	t.Helper()
	t.Setenv("MCP_CLIENT_ID", clientID)
	t.Setenv("MCP_CLIENT_SECRET", clientSecret)
	wf := &workflow.Workflow{Name: "oauth", Secrets: []workflow.Secret{{Name: "MCP_OAUTH", Source: "oauth2",
		TokenURL: tokenURL, ClientIDEnv: "MCP_CLIENT_ID", ClientSecretEnv: "MCP_CLIENT_SECRET"}}}
	reg, err := secrets.New(wf, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Now()}
	reg.Now = c.Now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := reg.Load(ctx); err != nil {
		t.Fatal(err)
	}
	return reg, c
}

func oauthPool(t *testing.T, reg *secrets.Registry, url string) (*kmcp.Pool, *firetest.Buffer) {
	t.Helper()
	audit := &firetest.Buffer{}
	p := kmcp.NewPool([]kmcp.Server{{Name: "web", URL: url, AllowTools: []string{"echo"}, OAuth2: "MCP_OAUTH"}},
		kmcp.Options{Secret: reg.Secret, Refused: reg.Refused, Audit: slog.New(slog.NewTextHandler(audit, nil))})
	t.Cleanup(func() { _ = p.Close() })
	return p, audit
}

// TestOAuth2ClientCredentials: the server's bearer is a client-credentials
// token, fetched once and reused until shortly before it expires (60 s of
// skew), then fetched again; a token the server refuses (401) is replaced
// once and the request sent again.
func TestOAuth2ClientCredentials(t *testing.T) {
	ti, tokenURL, gate, url := oauthServer(t)
	reg, clk := oauthRegistry(t, tokenURL)
	p, audit := oauthPool(t, reg, url)
	expect := func(step string, fetches int) {
		t.Helper()
		if _, err := callEcho(p, "web"); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if n := ti.fetches(); n != fetches {
			t.Fatalf("%s: %d token fetches, want %d", step, n, fetches)
		}
		if seen := gate.authorizations(); seen[len(seen)-1] != "Bearer "+ti.last() {
			t.Fatalf("%s: the server last saw %q, want the newest token", step, seen[len(seen)-1])
		}
	}
	expect("first call", 1)
	expect("second call, cached token", 1)
	clk.advance(3600*time.Second - 61*time.Second)
	expect("just before expiry minus skew", 1)
	clk.advance(2 * time.Second)
	expect("after expiry minus skew", 2)
	ti.revoke(ti.last())
	expect("revoked token: refreshed once on 401", 3)

	for _, tok := range append(ti.all(), clientSecret) {
		if strings.Contains(audit.String(), tok) {
			t.Errorf("the audit log holds a credential: %s", audit.String())
		}
	}
}

// TestOAuth2RefusedTokenRefreshesOnce: a server that refuses every token
// causes exactly one refresh for the request, then a clear error that
// holds no token.
func TestOAuth2RefusedTokenRefreshesOnce(t *testing.T) {
	ti, tokenURL, _, url := oauthServer(t)
	ti.mu.Lock()
	ti.closed = true
	ti.mu.Unlock()
	reg, _ := oauthRegistry(t, tokenURL)
	p, audit := oauthPool(t, reg, url)
	_, err := callEcho(p, "web")
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("got %v, want the credentials refused", err)
	}
	if n := ti.fetches(); n != 2 {
		t.Fatalf("%d token fetches, want 2 (start-up and one refresh)", n)
	}
	for _, tok := range append(ti.all(), clientSecret) {
		for _, sink := range []string{err.Error(), audit.String()} {
			if strings.Contains(sink, tok) {
				t.Errorf("a credential leaked: %s", sink)
			}
		}
	}
}

// TestAuthValidation: auth needs kind oauth2, a declared oauth2 secret, a
// url server, and no Authorization header beside it.
func TestAuthValidation(t *testing.T) {
	const declared = `
[[secrets]]
name = "TOK"
source = "oauth2"
token_url = "https://auth.example.com/token"
client_id_env = "ID"
client_secret_env = "SECRET"

[[secrets]]
name = "PLAIN"
source = "env"
var = "PLAIN"
`
	for _, tc := range []struct{ server, want string }{
		{`url = "https://127.0.0.1:9/mcp"` + "\nauth = { kind = \"basic\", secret = \"TOK\" }", `auth.kind "basic" must be oauth2`},
		{`url = "https://127.0.0.1:9/mcp"` + "\nauth = { kind = \"oauth2\" }", "auth.secret is required"},
		{`url = "https://127.0.0.1:9/mcp"` + "\nauth = { kind = \"oauth2\", secret = \"PLAIN\" }", `auth.secret "PLAIN" must name a [[secrets]] entry of source oauth2`},
		{`url = "https://127.0.0.1:9/mcp"` + "\nauth = { kind = \"oauth2\", secret = \"TOK\" }\nheaders = { authorization = \"x\" }", "set auth or an Authorization header, not both"},
		{`command = ["/bin/true"]` + "\nauth = { kind = \"oauth2\", secret = \"TOK\" }", "auth applies to url servers only"},
		{`url = "https://127.0.0.1:9/mcp"` + "\nauth = { kind = \"oauth2\", secret = \"TOK\", hosts = [\"https://as.example.com\"] }", `auth.hosts: "https://as.example.com" is not a host name`},
	} {
		src := strings.Replace(httpWorkflow("X", "echo"), `url = "X"`, tc.server, 1) + declared
		_, err := newHost(t, src)
		if err == nil {
			h, _ := newHost(t, src)
			err = kmcp.Validate(h.Program.Workflow)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.server, err, tc.want)
		}
	}
}

// TestOAuth2InWorkflow: a workflow's auth = { kind = "oauth2" } server,
// with the secrets family set up as a sealed binary does: a revoked token
// is replaced through the registry on the 401 and the run completes; no
// token reaches the outcome, the trace or the audit log.
func TestOAuth2InWorkflow(t *testing.T) {
	ti, tokenURL, gate, url := oauthServer(t)
	t.Setenv("MCP_CLIENT_ID", clientID)
	t.Setenv("MCP_CLIENT_SECRET", clientSecret)
	src := strings.Replace(httpWorkflow(url, "echo"), "allow_tools", `auth = { kind = "oauth2", secret = "MCP_OAUTH" }
allow_tools`, 1) + fmt.Sprintf(`
[[secrets]]
name = "MCP_OAUTH"
source = "oauth2"
token_url = %q
client_id_env = "MCP_CLIENT_ID"
client_secret_env = "MCP_CLIENT_SECRET"
`, tokenURL)
	h := mustHost(t, src, "")
	for _, ext := range runtime.Extensions() {
		if ext.Name != "secrets" {
			continue
		}
		if err := ext.Setup(context.Background(), h.Host); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ext.Close() })
	}
	args := map[string]any{"args": map[string]any{"message": "hi"}}
	var reports []*runtime.Report
	for i, revoke := range []bool{false, true} {
		if revoke {
			ti.revoke(ti.last())
		}
		rep := h.run(t, "tool", args)
		if rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("run %d: %+v", i, rep.Outcome)
		}
		reports = append(reports, rep)
	}
	if n := ti.fetches(); n != 2 {
		t.Fatalf("%d token fetches, want 2 (start-up, refresh after the revocation)", n)
	}
	if seen := gate.authorizations(); seen[len(seen)-1] != "Bearer "+ti.last() {
		t.Fatalf("the server last saw %q", seen[len(seen)-1])
	}
	for _, tok := range append(ti.all(), clientSecret) {
		for _, rep := range reports {
			for what, sink := range map[string]string{"outcome": jsonText(rep.Outcome), "trace": jsonText(rep.Trace), "audit": h.audit.String()} {
				if strings.Contains(sink, tok) {
					t.Errorf("a credential is in the %s: %s", what, sink)
				}
			}
		}
	}
}
