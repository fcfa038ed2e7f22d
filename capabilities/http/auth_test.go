package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

func TestBearer(t *testing.T) {
	t.Setenv("OPS_TOKENS", "tok-alpha-1111\n\n  tok-beta-2222  \n")
	src := wf("echo", `auth = "bearer:ops"
[[http_routes]]
method = "POST"
path = "/vault"
start_node = "main"
auth = "bearer"
[auth.bearer.ops]
tokens_env = "OPS_TOKENS"
[auth.bearer.default]
tokens_secret = "VAULT_TOKEN"
[[secrets]]
name = "VAULT_TOKEN"
source = "env"
var = "VAULT_TOKEN"
`)
	services := &runtime.Services{Secret: func(name string) (string, error) {
		if name == "VAULT_TOKEN" {
			return "vault-token-3333", nil
		}
		return "", errors.New("no such secret")
	}}
	ts := start(t, src, setup{services: services})
	for _, tok := range []string{"tok-alpha-1111", "tok-beta-2222"} {
		r := ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer "+tok).expect(t, 200)
		if r.at("final_value.trigger.principal.kind") != "bearer" || r.at("final_value.trigger.principal.name") != "ops" {
			t.Fatalf("principal: %s", r.body)
		}
	}
	ts.do(t, "POST", "/vault", `{}`, "Authorization", "Bearer vault-token-3333").expect(t, 200)
	denied := []struct{ auth, detail string }{
		{"", "missing bearer token"},
		{"Bearer tok-alpha-111", "not accepted"},
		{"Bearer tok-alpha-11111", "not accepted"},
		{"Bearer vault-token-3333", "not accepted"}, // another binding's token
		{"Basic dG9rLWFscGhhLTExMTE=", "missing bearer token"},
		{"Bearer", "missing bearer token"},
	}
	for _, d := range denied {
		r := ts.do(t, "POST", "/hook", `{}`, "Authorization", d.auth).expect(t, 401)
		if r.json["error"] != "unauthorized" || !strings.Contains(r.json["detail"].(string), d.detail) {
			t.Fatalf("%q: body %s", d.auth, r.body)
		}
	}
	audit := ts.Audit.String()
	if strings.Count(audit, `"msg":"http.auth_denied"`) != len(denied) {
		t.Fatalf("auth_denied events:\n%s", audit)
	}
	for _, secret := range []string{"tok-alpha", "tok-beta", "vault-token"} {
		if strings.Contains(audit, secret) {
			t.Fatalf("audit log leaks %q:\n%s", secret, audit)
		}
	}
}

func TestBasic(t *testing.T) {
	t.Setenv("TWILIO_CREDS", "twilio:s3cret-pass1\nother:pw2")
	ts := start(t, wf("echo", `auth = "basic:twilio"
[auth.basic.twilio]
credentials_env = "TWILIO_CREDS"
`), setup{})
	enc := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	r := ts.do(t, "POST", "/hook", `{}`, "Authorization", enc("twilio:s3cret-pass1")).expect(t, 200)
	if r.at("final_value.trigger.principal.kind") != "basic" || r.at("final_value.trigger.principal.name") != "twilio" {
		t.Fatalf("principal: %s", r.body)
	}
	// Credentials may also ride the URL.
	req := mustRequest(t, "POST", ts.URL+"/hook", `{}`)
	req.SetBasicAuth("other", "pw2")
	r = ts.send(t, req).expect(t, 200)
	if r.at("final_value.trigger.principal.name") != "other" {
		t.Fatalf("principal: %s", r.body)
	}
	for _, bad := range []string{
		enc("twilio:wrong"),
		enc("other:s3cret-pass1"), // a password of another user
		"Basic " + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("twilio:s3cret-pass1")), "="), // unpadded
		"Basic " + base64.URLEncoding.EncodeToString([]byte("twilio:s3cret-pass1?>")),                       // wrong alphabet
		enc("twilio"),
		"Bearer x",
	} {
		ts.do(t, "POST", "/hook", `{}`, "Authorization", bad).expect(t, 401)
	}
	if strings.Contains(ts.Audit.String(), "s3cret") {
		t.Fatal("audit log leaks the password")
	}
}

func sign(secret, payload string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

func TestHMAC(t *testing.T) {
	t.Setenv("GH_SECRET", "gh-webhook-secret")
	src := wf("echo", `auth = "hmac:github"
[[http_routes]]
method = "POST"
path = "/stamped"
start_node = "main"
auth = "hmac:stripe"
[auth.hmac.github]
secret_env = "GH_SECRET"
header = "X-Hub-Signature-256"
[auth.hmac.stripe]
secret = "stripe-secret"
header = "X-Sig"
prefix = ""
timestamp_header = "X-Timestamp"
tolerance_secs = 60
`)
	ts := start(t, src, setup{})
	body := `{"action":"opened"}`
	good := "sha256=" + sign("gh-webhook-secret", body)
	r := ts.do(t, "POST", "/hook", body, "X-Hub-Signature-256", good).expect(t, 200)
	if r.at("final_value.trigger.principal.kind") != "hmac" || r.at("final_value.trigger.principal.name") != "github" {
		t.Fatalf("principal: %s", r.body)
	}
	// Upper-case hex is the same signature.
	ts.do(t, "POST", "/hook", body, "X-Hub-Signature-256", "sha256="+strings.ToUpper(sign("gh-webhook-secret", body))).expect(t, 200)
	for name, c := range map[string][2]string{
		"tampered body":   {`{"action":"closed"}`, good},
		"missing header":  {body, ""},
		"no prefix":       {body, sign("gh-webhook-secret", body)},
		"wrong secret":    {body, "sha256=" + sign("other", body)},
		"not hex":         {body, "sha256=zz" + sign("gh-webhook-secret", body)[2:]},
		"short signature": {body, good[:40]},
	} {
		r := ts.do(t, "POST", "/hook", c[0], "X-Hub-Signature-256", c[1])
		if r.code != 401 {
			t.Fatalf("%s: status %d: %s", name, r.code, r.body)
		}
	}

	// Timestamped signatures cover "ts.body" and expire.
	now := time.Now().Unix()
	stamp := func(ts int64, b string) (string, string) {
		s := strconv.FormatInt(ts, 10)
		return s, sign("stripe-secret", s+"."+b)
	}
	tsv, sig := stamp(now, body)
	ts.do(t, "POST", "/stamped", body, "X-Timestamp", tsv, "X-Sig", sig).expect(t, 200)
	// Replayed later: the same signed request, outside the tolerance.
	oldTS, oldSig := stamp(now-120, body)
	r = ts.do(t, "POST", "/stamped", body, "X-Timestamp", oldTS, "X-Sig", oldSig).expect(t, 401)
	if !strings.Contains(r.body, "stale or replayed") {
		t.Fatalf("stale detail: %s", r.body)
	}
	// Replay with a fresh timestamp but the old signature.
	ts.do(t, "POST", "/stamped", body, "X-Timestamp", tsv, "X-Sig", oldSig).expect(t, 401)
	// From the future.
	futTS, futSig := stamp(now+3600, body)
	ts.do(t, "POST", "/stamped", body, "X-Timestamp", futTS, "X-Sig", futSig).expect(t, 401)
	// Body-only signature does not pass a timestamped binding.
	ts.do(t, "POST", "/stamped", body, "X-Timestamp", tsv, "X-Sig", sign("stripe-secret", body)).expect(t, 401)
	ts.do(t, "POST", "/stamped", body, "X-Sig", sig).expect(t, 401)
	ts.do(t, "POST", "/stamped", body, "X-Timestamp", "yesterday", "X-Sig", sig).expect(t, 401)
	if a := ts.Audit.String(); strings.Contains(a, "gh-webhook-secret") || strings.Contains(a, "stripe-secret") {
		t.Fatal("audit log leaks an HMAC secret")
	}
}

func TestSIGHUPReloadsSecrets(t *testing.T) {
	t.Setenv("ROTATING", "old-token-aaaa")
	ts := start(t, wf("echo", `auth = "bearer:rot"
[auth.bearer.rot]
tokens_env = "ROTATING"
`), setup{})
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer old-token-aaaa").expect(t, 200)
	t.Setenv("ROTATING", "new-token-bbbb")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(ts.Audit.String(), "http.reloaded") })
	// The keep-alive connection of the first request is still usable.
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer new-token-bbbb").expect(t, 200)
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer old-token-aaaa").expect(t, 401)

	// A reload that fails keeps the previous secrets in force.
	t.Setenv("ROTATING", "")
	if err := ts.Reload(); err == nil {
		t.Fatal("reload with an empty token set succeeded")
	}
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer new-token-bbbb").expect(t, 200)
	if !strings.Contains(ts.Audit.String(), "http.reload_failed") {
		t.Fatal("no reload_failed audit event")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAuthorizationSingleCredential: on a route with auth, of any kind, a
// request with two Authorization headers, or two credentials joined by a
// comma in one, is answered 400 before the credential is checked, even
// when the first credential is valid; on an open route the header is not
// read and nothing changes.
func TestAuthorizationSingleCredential(t *testing.T) {
	t.Setenv("OPS_TOKENS", "tok-alpha-1111")
	t.Setenv("GH_SECRET", "gh-webhook-secret")
	src := wf("echo", `auth = "bearer:ops"
[[http_routes]]
method = "POST"
path = "/basic"
start_node = "main"
auth = "basic:twilio"
[[http_routes]]
method = "POST"
path = "/signed"
start_node = "main"
auth = "hmac:github"
[[http_routes]]
method = "POST"
path = "/open"
start_node = "main"
[auth.bearer.ops]
tokens_env = "OPS_TOKENS"
[auth.basic.twilio]
credentials = ["twilio:s3cret-pass1"]
[auth.hmac.github]
secret_env = "GH_SECRET"
header = "X-Hub-Signature-256"
`)
	ts := start(t, src, setup{})
	body := `{}`
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("twilio:s3cret-pass1"))
	signed := []string{"X-Hub-Signature-256", "sha256=" + sign("gh-webhook-secret", body)}
	routes := []struct {
		path  string
		auth  string   // a valid credential for the route ("" = none)
		extra []string // other headers the route needs
	}{
		{"/hook", "Bearer tok-alpha-1111", nil},
		{"/basic", basic, nil},
		{"/signed", "", signed},
	}
	request := func(path string, extra []string, auth ...string) *http.Request {
		req := mustRequest(t, "POST", ts.URL+path, body)
		for i := 0; i+1 < len(extra); i += 2 {
			req.Header.Set(extra[i], extra[i+1])
		}
		for _, a := range auth {
			req.Header.Add("Authorization", a)
		}
		return req
	}
	refused := 0
	for _, rt := range routes {
		// The valid request passes.
		var one []string
		if rt.auth != "" {
			one = []string{rt.auth}
		}
		ts.send(t, request(rt.path, rt.extra, one...)).expect(t, 200)
		for name, auth := range map[string][]string{
			"two headers, valid first":   {orElse(rt.auth, "Bearer tok-alpha-1111"), "Bearer other"},
			"two headers, valid second":  {"Bearer other", orElse(rt.auth, "Bearer tok-alpha-1111")},
			"two identical headers":      {orElse(rt.auth, basic), orElse(rt.auth, basic)},
			"comma-joined, valid first":  {orElse(rt.auth, "Bearer tok-alpha-1111") + ", Bearer other"},
			"comma-joined, valid second": {"Bearer other," + orElse(rt.auth, "Bearer tok-alpha-1111")},
		} {
			r := ts.send(t, request(rt.path, rt.extra, auth...))
			if r.code != 400 || r.json["error"] != "bad request" || !strings.Contains(fmt.Sprint(r.json["detail"]), "Authorization") ||
				!strings.Contains(fmt.Sprint(r.json["detail"]), "exactly one") || r.json["final_value"] != nil {
				t.Errorf("%s, %s: %d %s", rt.path, name, r.code, r.body)
			}
			refused++
		}
	}
	// Header lines differing in case are one field.
	got := raw(t, ts, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nAuthorization: Bearer tok-alpha-1111\r\n"+
		"authorization: Bearer other\r\nConnection: close\r\n\r\n{}")
	if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, `"2 Authorization headers; send exactly one credential"`) {
		t.Errorf("raw request with two header lines: %q", got)
	}
	refused++
	if n := strings.Count(ts.Audit.String(), `"msg":"http.auth_denied"`); n != refused {
		t.Errorf("%d http.auth_denied events, want %d", n, refused)
	}
	// An open route does not read Authorization.
	ts.send(t, request("/open", nil, "Bearer a", "Bearer b, c")).expect(t, 200)
	if strings.Contains(ts.Audit.String(), "tok-alpha") || strings.Contains(ts.Audit.String(), "s3cret") {
		t.Fatal("audit log leaks a credential")
	}
}

func orElse(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

// TestAuthorizationSingleCredentialMTLS: an mtls route, which never reads
// Authorization, refuses two credentials in it all the same.
func TestAuthorizationSingleCredentialMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
	sc, sk, _ := ca.issue(t, "server", true)
	writeFile(t, filepath.Join(dir, "server.pem"), sc)
	writeFile(t, filepath.Join(dir, "server.key"), sk)
	writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.pem)
	_, _, good := clientCA.issue(t, "agent-1", false)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	h := newHost(t, wf("echo", `auth = "mtls"
[server.tls]
cert_file = "server.pem"
key_file = "server.key"
[server.tls.client_auth]
mode = "required"
ca_file = "clients.pem"
`), setup{})
	h.Program.Workflow.Source = filepath.Join(dir, "workflow.toml")
	buf := &syncBuffer{}
	h.Engine.Audit = newTestAudit(buf)
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, true)
	tlsClient(ts, roots, &good)
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer a").expect(t, 200)
	req := mustRequest(t, "POST", ts.URL+"/hook", `{}`)
	req.Header.Add("Authorization", "Bearer a")
	req.Header.Add("Authorization", "Bearer b")
	if r := ts.send(t, req).expect(t, 400); r.json["error"] != "bad request" {
		t.Fatalf("body %s", r.body)
	}
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer a, Bearer b").expect(t, 400)
}

// A generated program registers the built-in auth kinds its routes use
// (capabilities/all registers them all, for kiln run); these tests use
// them all.
func init() { RegisterAuthKinds() }

// TestAuthKindRefusedUnlessRegistered: a route whose built-in auth kind
// the program did not register is refused at start, naming the route,
// never served open.
func TestAuthKindRefusedUnlessRegistered(t *testing.T) {
	h := newHost(t, wf("echo", `auth = "bearer:ci"`)+`
[auth.bearer.ci]
tokens = ["t0ken-long-enough-for-the-check"]
`, setup{})
	if _, err := New(h, Config{}); err != nil {
		t.Fatalf("positive control: with bearer registered: %v", err)
	}
	authMu.Lock()
	delete(authKinds, "bearer")
	authMu.Unlock()
	defer RegisterAuthKind(AuthBearer)
	_, err := New(h, Config{})
	if err == nil || !strings.Contains(err.Error(), "POST /hook") || !strings.Contains(err.Error(), `auth kind "bearer" is not compiled into this binary`) {
		t.Fatalf("err = %v, want a refusal naming the route", err)
	}
}
