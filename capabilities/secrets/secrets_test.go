package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func decode(t *testing.T, src string) *workflow.Workflow {
	t.Helper()
	var wf workflow.Workflow
	md, err := toml.Decode("name = \"s\"\n[[nodes]]\nid = \"n\"\ntype = \"secretstest_noop\"\n"+src, &wf)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded %v", und)
	}
	return &wf
}

func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "secretstest_noop", Family: "secretstest",
		Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) {
			return func(context.Context, *runtime.Call) (runtime.Result, error) { return runtime.Next(nil), nil }, nil
		}})
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// host runs the extension's Setup the way the CLI does.
func host(t *testing.T, wf *workflow.Workflow) (*runtime.Host, *syncBuf, error) {
	t.Helper()
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuf{}
	audit, _, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: buf})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Program: p, Engine: &runtime.Engine{Audit: audit, Services: &runtime.Services{Secret: runtime.EnvSecret}}}
	err = setup(context.Background(), h)
	t.Cleanup(func() { closeActive() })
	return h, buf, err
}

func TestEnvSourceAndFallback(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_A", "alpha-value-1")
	t.Setenv("KILN_SECRETS_TEST_PLAIN", "plain-value-2")
	h, _, err := host(t, decode(t, `
[[secrets]]
name = "API"
source = "env"
var = "KILN_SECRETS_TEST_A"
`))
	if err != nil {
		t.Fatal(err)
	}
	sec := h.Engine.Services.Secret
	if v, err := sec("API"); err != nil || v != "alpha-value-1" {
		t.Fatalf("API = %q, %v", v, err)
	}
	// Undeclared names fall back to the environment.
	if v, err := sec("KILN_SECRETS_TEST_PLAIN"); err != nil || v != "plain-value-2" {
		t.Fatalf("fallback = %q, %v", v, err)
	}
	for _, v := range []string{"alpha-value-1", "plain-value-2"} {
		if runtime.Redact("x "+v+" y") != "x [REDACTED] y" {
			t.Fatalf("%s not registered for redaction", v)
		}
	}
}

func TestMissingSecretStopsStartUp(t *testing.T) {
	for name, src := range map[string]string{
		"env":     "[[secrets]]\nname = \"GONE\"\nsource = \"env\"\nvar = \"KILN_SECRETS_TEST_UNSET\"\n",
		"file":    "[[secrets]]\nname = \"GONE\"\nsource = \"file\"\npath = \"/nonexistent/kiln-secret\"\n",
		"command": "[[secrets]]\nname = \"GONE\"\nsource = \"command\"\nargv = [\"/bin/sh\", \"-c\", \"echo leaked-output; exit 3\"]\n",
		"oauth2":  "[[secrets]]\nname = \"GONE\"\nsource = \"oauth2\"\ntoken_url = \"https://127.0.0.1:1/token\"\nclient_id_env = \"KILN_SECRETS_TEST_UNSET\"\nclient_secret_env = \"KILN_SECRETS_TEST_UNSET\"\n",
	} {
		_, _, err := host(t, decode(t, src))
		if err == nil || !strings.Contains(err.Error(), "secret GONE ("+name+")") {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(err.Error(), "leaked-output") {
			t.Fatalf("%s: command output in the error: %v", name, err)
		}
	}
}

func TestInvalidEntriesRefused(t *testing.T) {
	for _, src := range []string{
		"[[secrets]]\nname = \"X\"\nsource = \"vault\"\n",
		"[[secrets]]\nname = \"X\"\nsource = \"command\"\nargv = [\"cat\", \"f\"]\n",
		"[[secrets]]\nname = \"X\"\nsource = \"oauth2\"\ntoken_url = \"http://auth.example.com/token\"\nclient_id_env = \"A\"\nclient_secret_env = \"B\"\n",
		"[[secrets]]\nname = \"X\"\nsource = \"env\"\nvar = \"A\"\n[[secrets]]\nname = \"X\"\nsource = \"env\"\nvar = \"B\"\n",
	} {
		if _, err := New(decode(t, src), nil); err == nil || !strings.Contains(err.Error(), `"X"`) {
			t.Fatalf("%q: %v", src, err)
		}
	}
}

func TestFileSourceReReadEachUse(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte("  first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(dir, "raw")
	if err := os.WriteFile(raw, []byte("keep-newline\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wf := decode(t, `
[[secrets]]
name = "TOK"
source = "file"
path = "token"
[[secrets]]
name = "RAW"
source = "file"
path = "raw"
trim = false
`)
	wf.Source = filepath.Join(dir, "workflow.toml") // relative paths: the workflow's dir
	h, _, err := host(t, wf)
	if err != nil {
		t.Fatal(err)
	}
	sec := h.Engine.Services.Secret
	if v, _ := sec("TOK"); v != "first-token" {
		t.Fatalf("TOK = %q", v)
	}
	if v, _ := sec("RAW"); v != "keep-newline\n" {
		t.Fatalf("RAW = %q", v)
	}
	if err := os.WriteFile(f, []byte("rotated-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := sec("TOK"); v != "rotated-token" {
		t.Fatalf("after rotation TOK = %q", v)
	}
	os.Remove(f)
	if _, err := sec("TOK"); err == nil || !strings.Contains(err.Error(), "secret TOK (file)") {
		t.Fatalf("removed file: %v", err)
	}
}

// counterCommand prints a value and counts its runs in a file.
func counterCommand(t *testing.T) (argv string, runs func() int) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	script := fmt.Sprintf("echo x >> %s; echo cmd-secret-$(wc -l < %s)", count, count)
	return fmt.Sprintf("[\"/bin/sh\", \"-c\", %q]", script), func() int {
		data, _ := os.ReadFile(count)
		return strings.Count(string(data), "x")
	}
}

func TestCommandSourceCachedAndSIGHUPReloads(t *testing.T) {
	argv, runs := counterCommand(t)
	h, buf, err := host(t, decode(t, "[[secrets]]\nname = \"CMD\"\nsource = \"command\"\nargv = "+argv+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	sec := h.Engine.Services.Secret
	for range 3 {
		if v, _ := sec("CMD"); v != "cmd-secret-1" {
			t.Fatalf("CMD = %q", v)
		}
	}
	if runs() != 1 {
		t.Fatalf("command ran %d times, want once", runs())
	}
	// A real SIGHUP to this process re-resolves.
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "secrets.reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload:\n%s", buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v, _ := sec("CMD"); v != "cmd-secret-2" || runs() != 2 {
		t.Fatalf("after SIGHUP CMD = %q, runs %d", v, runs())
	}
	if strings.Contains(buf.String(), "cmd-secret") {
		t.Fatalf("secret value in the audit log:\n%s", buf)
	}
}

func TestReloadFailureKeepsPreviousValues(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_R", "before-reload")
	reg, err := New(decode(t, "[[secrets]]\nname = \"R\"\nsource = \"env\"\nvar = \"KILN_SECRETS_TEST_R\"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("KILN_SECRETS_TEST_R")
	if err := reg.Load(context.Background()); err == nil || !strings.Contains(err.Error(), "secret R (env)") {
		t.Fatalf("reload: %v", err)
	}
	if v, _ := reg.Secret("R"); v != "before-reload" {
		t.Fatalf("R = %q", v)
	}
}

// tokenServer is a local OAuth2 token endpoint issuing numbered tokens.
type tokenServer struct {
	*httptest.Server
	calls     atomic.Int64
	lastForm  atomic.Value // map[string]string
	lastBasic atomic.Value // string
	expiresIn string
}

func newTokenServer(t *testing.T, expiresIn string) *tokenServer {
	ts := &tokenServer{expiresIn: expiresIn}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad", 400)
			return
		}
		form := map[string]string{}
		for k := range r.PostForm {
			form[k] = r.PostForm.Get(k)
		}
		ts.lastForm.Store(form)
		ts.lastBasic.Store(r.Header.Get("Authorization"))
		id, secret := form["client_id"], form["client_secret"]
		if u, p, ok := r.BasicAuth(); ok {
			id, secret = u, p
		}
		if id != "my-client" || secret != "client-secret-xyz" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		n := ts.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"access-token-%d","token_type":"Bearer","expires_in":%s}`, n, ts.expiresIn)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func oauthTOML(url, style string, skew int) string {
	return fmt.Sprintf(`
[[secrets]]
name = "SF"
source = "oauth2"
token_url = %q
client_id_env = "KILN_SECRETS_TEST_CID"
client_secret_env = "KILN_SECRETS_TEST_CSECRET"
scopes = ["api", "refresh"]
extra_params = { audience = "https://api.example" }
auth_style = %q
skew_secs = %d
`, url+"/token", style, skew)
}

func TestOAuth2ClientCredentialsCachedUntilExpiryMinusSkew(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	ts := newTokenServer(t, "120")
	reg, err := New(decode(t, oauthTOML(ts.URL, "body", 60)), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	reg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	form := ts.lastForm.Load().(map[string]string)
	if form["grant_type"] != "client_credentials" || form["scope"] != "api refresh" || form["audience"] != "https://api.example" ||
		form["client_id"] != "my-client" || form["client_secret"] != "client-secret-xyz" {
		t.Fatalf("form %v", form)
	}
	if v, _ := reg.Secret("SF"); v != "access-token-1" {
		t.Fatalf("token %q", v)
	}
	advance(59 * time.Second) // expiry 120 s - skew 60 s: still fresh
	if v, _ := reg.Secret("SF"); v != "access-token-1" || ts.calls.Load() != 1 {
		t.Fatalf("at 59s: %q after %d calls", v, ts.calls.Load())
	}
	advance(2 * time.Second) // 61 s: refreshed on use
	if v, _ := reg.Secret("SF"); v != "access-token-2" || ts.calls.Load() != 2 {
		t.Fatalf("at 61s: %q after %d calls", v, ts.calls.Load())
	}
	if runtime.Redact("access-token-2 client-secret-xyz") != "[REDACTED] [REDACTED]" {
		t.Fatal("token or client secret not registered for redaction")
	}
}

func TestOAuth2BasicAuthStyle(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	ts := newTokenServer(t, `"3600"`)
	h, _, err := host(t, decode(t, oauthTOML(ts.URL, "basic", 60)))
	if err != nil {
		t.Fatal(err)
	}
	form := ts.lastForm.Load().(map[string]string)
	if _, ok := form["client_secret"]; ok {
		t.Fatalf("basic style sent the secret in the body: %v", form)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("my-client:client-secret-xyz"))
	if ts.lastBasic.Load() != want {
		t.Fatalf("authorization %q", ts.lastBasic.Load())
	}
	if v, _ := h.Engine.Services.Secret("SF"); v != "access-token-1" {
		t.Fatalf("token %q", v)
	}
}

func TestOAuth2Rejected(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "wrong-secret-abc")
	ts := newTokenServer(t, "60")
	_, _, err := host(t, decode(t, oauthTOML(ts.URL, "body", 60)))
	if err == nil || !strings.Contains(err.Error(), "secret SF (oauth2): token endpoint") || !strings.Contains(err.Error(), "401 (invalid_client)") {
		t.Fatalf("setup: %v", err)
	}
	if strings.Contains(err.Error(), "wrong-secret-abc") {
		t.Fatalf("client secret in the error: %v", err)
	}
}

func TestNoSecretsDeclaredKeepsFallback(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_ONLY_ENV", "env-only-value")
	h, _, err := host(t, decode(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := h.Engine.Services.Secret("KILN_SECRETS_TEST_ONLY_ENV"); err != nil || v != "env-only-value" {
		t.Fatalf("%q %v", v, err)
	}
	if _, err := h.Engine.Services.Secret("KILN_SECRETS_TEST_NOPE"); err == nil {
		t.Fatal("unset secret resolved")
	}
}

func TestChildWorkflowSecretsJoinTheRegistry(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "child-token"), []byte("child-file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := decode(t, "")
	child := decode(t, "[[secrets]]\nname = \"CHILD\"\nsource = \"file\"\npath = \"child-token\"\n")
	child.Source = filepath.Join(dir, "child.toml")
	parent.Children = map[string]*workflow.Workflow{"child.toml": child}
	reg, err := New(parent, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v, err := reg.Secret("CHILD"); err != nil || v != "child-file-token" {
		t.Fatalf("CHILD = %q, %v", v, err)
	}
	// The same name declared differently by parent and child is refused.
	parent.Secrets = []workflow.Secret{{Name: "CHILD", Source: "env", Var: "X"}}
	if _, err := New(parent, nil); err == nil || !strings.Contains(err.Error(), "declared differently") {
		t.Fatalf("conflict: %v", err)
	}
}

// TestOAuth2RefusedAndRetarget: Refused drops a token only while it is
// the cached one (a second refusal of the same token after a refresh
// fetches nothing), and is a no-op for other sources; Retarget moves the
// entry to another token endpoint with the same client credentials and
// refuses a plain-http endpoint off loopback.
func TestOAuth2RefusedAndRetarget(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	t.Setenv("KILN_SECRETS_TEST_PLAIN", "plain-value")
	ts := newTokenServer(t, "3600")
	reg, err := New(decode(t, oauthTOML(ts.URL, "body", 60)+`
[[secrets]]
name = "P"
source = "env"
var = "KILN_SECRETS_TEST_PLAIN"
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg.Refused("SF", "access-token-1")
	if v, _ := reg.Secret("SF"); v != "access-token-2" {
		t.Fatalf("after the refusal: %q", v)
	}
	reg.Refused("SF", "access-token-1") // a late refusal of the old token
	if v, _ := reg.Secret("SF"); v != "access-token-2" || ts.calls.Load() != 2 {
		t.Fatalf("a stale refusal fetched again: %q after %d calls", v, ts.calls.Load())
	}
	reg.Refused("P", "plain-value")
	if v, err := reg.Secret("P"); v != "plain-value" || err != nil {
		t.Fatalf("env secret after a refusal: %q %v", v, err)
	}

	other := newTokenServer(t, "3600")
	if err := reg.Retarget("SF", other.URL+"/token"); err != nil {
		t.Fatal(err)
	}
	if v, _ := reg.Secret("SF"); v != "access-token-1" || other.calls.Load() != 1 || ts.calls.Load() != 2 {
		t.Fatalf("after Retarget: %q, %d calls there, %d at the declared endpoint", v, other.calls.Load(), ts.calls.Load())
	}
	if err := reg.Retarget("SF", "http://auth.example.com/token"); err == nil || !strings.Contains(err.Error(), "must use https") {
		t.Fatalf("plain http off loopback: %v", err)
	}
	if err := reg.Retarget("P", other.URL+"/token"); err == nil {
		t.Fatal("Retarget of an env secret was accepted")
	}
}
