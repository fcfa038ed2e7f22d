package mcp_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/capabilities/internal/netguard/netguardtest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// discoveryServers starts, on loopback: the token endpoint the workflow
// declares (whose tokens the MCP server does not accept), an
// authorization server at localhost (metadata and token endpoint) and the
// MCP server at 127.0.0.1, which answers 401 with resource_metadata
// pointing at its protected resource metadata; that metadata names
// issuer. It returns the declared token URL, the authorization server's
// issuer, the real issuer's tokens and the MCP url.
func discoveryServers(t *testing.T, issuerFor func(asIssuer string) string) (declared *tokenIssuer, declaredURL string, real *tokenIssuer, mcpURL string) {
	t.Helper()
	declared = &tokenIssuer{valid: map[string]bool{}, expires: 3600}
	dts := httptest.NewServer(declared)
	t.Cleanup(dts.Close)

	real = &tokenIssuer{valid: map[string]bool{}, expires: 3600}
	asMux := http.NewServeMux()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, asPort, _ := net.SplitHostPort(ln.Addr().String())
	asIssuer := "http://localhost:" + asPort
	asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": asIssuer, "token_endpoint": asIssuer + "/token"})
	})
	asMux.Handle("/token", real)
	as := &httptest.Server{Listener: ln, Config: &http.Server{Handler: asMux}}
	as.Start()
	t.Cleanup(as.Close)

	gate := &bearerGate{accept: real.accepts, h: statefulHTTP(newTestServer(filepath.Join(t.TempDir(), "calls.jsonl")))}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gate)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	mux.HandleFunc("/.well-known/oauth-protected-resource", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": ts.URL + "/mcp", "authorization_servers": []string{issuerFor(asIssuer)}})
	})
	gate.challenge = `Bearer realm="mcp", resource_metadata="` + ts.URL + `/.well-known/oauth-protected-resource"`
	return declared, dts.URL + "/token", real, ts.URL + "/mcp"
}

func discoveryPool(t *testing.T, url, tokenURL string, hosts []string, pol *policy.Policy) (*kmcp.Pool, *firetest.Buffer) {
	t.Helper()
	reg, _ := oauthRegistry(t, tokenURL)
	audit := &firetest.Buffer{}
	p := kmcp.NewPool([]kmcp.Server{{Name: "web", URL: url, AllowTools: []string{"echo"}, OAuth2: "MCP_OAUTH", AuthHosts: hosts}},
		kmcp.Options{Secret: reg.Secret, Refused: reg.Refused, Retarget: reg.Retarget, Policy: pol,
			Audit: slog.New(slog.NewTextHandler(audit, nil))})
	t.Cleanup(func() { _ = p.Close() })
	return p, audit
}

// TestProtectedResourceDiscovery: the server refuses the declared token
// endpoint's token and points at its metadata; kiln follows it to the
// authorization server at an auth.hosts host, fetches a token there with
// the declared client credentials and the call succeeds.
func TestProtectedResourceDiscovery(t *testing.T) {
	declared, tokenURL, real, url := discoveryServers(t, func(as string) string { return as })
	p, audit := discoveryPool(t, url, tokenURL, []string{"localhost"}, nil)
	if _, err := callEcho(p, "web"); err != nil {
		t.Fatal(err)
	}
	if declared.fetches() != 1 || real.fetches() != 1 {
		t.Fatalf("token fetches: declared %d, discovered %d; want 1 and 1", declared.fetches(), real.fetches())
	}
	for _, tok := range append(append(declared.all(), real.all()...), clientSecret) {
		if strings.Contains(audit.String(), tok) {
			t.Errorf("a credential is in the audit log: %s", audit.String())
		}
	}
}

// TestDiscoveryRefusesUnlistedHosts: metadata naming an authorization
// server on a host that is neither the server's nor in auth.hosts, or one
// [policy.http] does not allow, is refused before any request to it.
func TestDiscoveryRefusesUnlistedHosts(t *testing.T) {
	var evilHits atomic.Int64
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { evilHits.Add(1) }))
	t.Cleanup(evil.Close)
	_, evilPort, _ := net.SplitHostPort(evil.Listener.Addr().String())
	netguardtest.Resolve(t, map[string]string{"evil.kiln.test": "127.0.0.1"})
	evilIssuer := "http://evil.kiln.test:" + evilPort

	_, tokenURL, real, url := discoveryServers(t, func(string) string { return evilIssuer })
	p, _ := discoveryPool(t, url, tokenURL, []string{"localhost"}, nil)
	_, err := callEcho(p, "web")
	if err == nil || !strings.Contains(err.Error(), "neither the server's host nor in auth.hosts") {
		t.Fatalf("got %v, want the host refused", err)
	}
	if evilHits.Load() != 0 || real.fetches() != 0 {
		t.Fatalf("requests went out: %d to the unlisted host, %d token fetches", evilHits.Load(), real.fetches())
	}

	// Listed, but [policy.http] does not allow it.
	_, tokenURL, real, url = discoveryServers(t, func(as string) string { return as })
	pol := policy.New(&workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{url[:strings.LastIndex(url, "/")] + "/**"}}})
	p, _ = discoveryPool(t, url, tokenURL, []string{"localhost"}, pol)
	_, err = callEcho(p, "web")
	if err == nil || !strings.Contains(err.Error(), "auth discovery: authorization server") {
		t.Fatalf("got %v, want the policy to refuse the authorization server", err)
	}
	if real.fetches() != 0 {
		t.Fatalf("%d token fetches at a host the policy refuses", real.fetches())
	}
}
