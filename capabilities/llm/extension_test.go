package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime"
)

func TestHTTPTransportWithBearerFile(t *testing.T) {
	srv := mock.New(&mock.Script{Turns: []mock.Turn{turn("from http", 4, 2)}})
	var auth string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	tokenFile := filepath.Join(t.TempDir(), "bearer")
	os.WriteFile(tokenFile, []byte("tok-file-777\n"), 0o600)

	p := compile(t, classify, nil)
	audit := &syncBuf{}
	e := &runtime.Engine{Audit: slog.New(slog.NewJSONHandler(audit, nil))}
	// The flag wins over the environment's token.
	env := map[string]string{llm.EnvBearer: "tok-env-should-lose"}
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, "", ts.URL+"/rpc", tokenFile, env); err != nil {
		t.Fatal(err)
	}
	r := runOnce(t, e, p, map[string]any{"text": "t"})
	wantStatus(t, r, runtime.StatusCompleted)
	if output(t, r, "classify")["content"] != "from http" || auth != "Bearer tok-file-777" {
		t.Fatalf("auth = %q, out = %v", auth, output(t, r, "classify"))
	}
	if runtime.Redact("x tok-file-777 y") != "x [REDACTED] y" {
		t.Fatal("the bearer token was not registered for redaction")
	}
}

func TestHTTPTransportFromEnvironment(t *testing.T) {
	srv := mock.New(&mock.Script{Turns: []mock.Turn{turn("env", 1, 1)}})
	var auth string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	p := compile(t, classify, nil)
	e := &runtime.Engine{}
	env := map[string]string{llm.EnvHTTP: ts.URL, llm.EnvBearer: "tok-env-1"}
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, "", "", "", env); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, runOnce(t, e, p, nil), runtime.StatusCompleted)
	if auth != "Bearer tok-env-1" {
		t.Fatalf("auth = %q", auth)
	}
}

func TestSetupRejectsBadConfiguration(t *testing.T) {
	p := compile(t, classify, nil)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	cases := []struct {
		name              string
		unix, url, bearer string
		env               map[string]string
		want              string
	}{
		{"both transports", "/tmp/x.sock", "http://127.0.0.1:1/", "", nil, "set twice"},
		{"both from env", "", "", "", map[string]string{llm.EnvUnix: "/tmp/x.sock", llm.EnvHTTP: "http://h/"}, "set twice"},
		{"bearer without http", "/tmp/x.sock", "", empty, nil, "needs --intel-http"},
		{"not a URL", "", "localhost:8080", "", nil, "not an absolute http(s) URL"},
		{"credentials in URL", "", "http://u:p@127.0.0.1/", "", nil, "credentials"},
		{"empty bearer file", "", "http://127.0.0.1/", empty, nil, "is empty"},
		{"missing bearer file", "", "http://127.0.0.1/", "/nonexistent/bearer", nil, "--intel-http-bearer-file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.SetupForTest(&runtime.Host{Engine: &runtime.Engine{}, Program: p}, tc.unix, tc.url, tc.bearer, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

type fixedClient struct{ calls int }

func (f *fixedClient) Complete(ctx context.Context, req *intel.Request) (*intel.Response, error) {
	f.calls++
	return &intel.Response{Content: "mocked"}, nil
}

func TestSetupKeepsAnInstalledClient(t *testing.T) {
	p := compile(t, classify, nil)
	fc := &fixedClient{}
	e := &runtime.Engine{Services: &runtime.Services{}}
	intel.SetClient(e.Services, func(string) (intel.Client, error) { return fc, nil })
	// Even with a transport configured, the fixture runner's mock stays.
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, "/tmp/x.sock", "", "", nil); err != nil {
		t.Fatal(err)
	}
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	if fc.calls != 1 || output(t, r, "classify")["content"] != "mocked" {
		t.Fatalf("calls = %d", fc.calls)
	}
}

// A named backend goes to its provider with the backend's model and
// max_tokens, the key from the secrets registry, never logged.
func TestNamedProviderBackendEndToEnd(t *testing.T) {
	var got map[string]any
	var key string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			t.Errorf("path %s", r.URL.Path)
		}
		key = r.Header.Get("x-api-key")
		data, _ := io.ReadAll(r.Body)
		json.Unmarshal(data, &got)
		io.WriteString(w, `{"type":"message","role":"assistant","content":[{"type":"text","text":"{\"label\":\"pos\",\"score\":1}"}],
			"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":9}}`)
	}))
	defer api.Close()
	p := compile(t, `
name = "named"
[intelligence]
[[intelligence.backends]]
name = "claude"
provider = "anthropic"
model = "claude-test-1"
api_key_env = "CLAUDE_KEY"
base_url = "`+api.URL+`"
max_tokens = 256
[[nodes]]
id = "judge"
type = "llm_infer"
backend = "claude"
prompt = "Judge {{trigger.text}}"
output_schema = "schemas/label.json"
`, schemaAssets)
	audit := &syncBuf{}
	e := &runtime.Engine{Audit: slog.New(slog.NewJSONHandler(audit, nil)), Services: &runtime.Services{}}
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, "", "", "", nil); err != nil {
		t.Fatal(err)
	}
	// The secrets family fills Secret after llm's Setup: resolved at request time.
	e.Services.Secret = func(name string) (string, error) {
		if name == "CLAUDE_KEY" {
			return "sk-ant-from-registry", nil
		}
		return "", errors.New("no secret " + name)
	}
	r := runOnce(t, e, p, map[string]any{"text": "wow"})
	wantStatus(t, r, runtime.StatusCompleted)
	if key != "sk-ant-from-registry" || got["model"] != "claude-test-1" || got["max_tokens"] != float64(256) {
		t.Fatalf("key = %q, request = %v", key, got)
	}
	if output(t, r, "judge")["parsed"].(map[string]any)["label"] != "pos" || r.Counters.Snapshot()["llm_tokens"] != 29 {
		t.Fatalf("output = %v", output(t, r, "judge"))
	}
	rec, _ := json.Marshal(r.Trace)
	if strings.Contains(audit.String(), "sk-ant-from-registry") || strings.Contains(string(rec), "sk-ant-from-registry") {
		t.Fatal("API key leaked into the audit log or trace")
	}
}

func TestConflictingBackendDeclarations(t *testing.T) {
	parent := compile(t, `
name = "p"
[intelligence]
[[intelligence.backends]]
name = "b"
provider = "openai"
model = "one"
[[nodes]]
id = "n"
type = "llm_infer"
backend = "b"
prompt = "x"
`, nil)
	child := compile(t, `
name = "c"
[intelligence]
[[intelligence.backends]]
name = "b"
provider = "openai"
model = "two"
[[nodes]]
id = "n"
type = "llm_infer"
backend = "b"
prompt = "x"
`, nil)
	parent.Children["child.toml"] = child
	err := llm.SetupForTest(&runtime.Host{Engine: &runtime.Engine{}, Program: parent}, "", "", "", nil)
	if err == nil || !strings.Contains(err.Error(), `backend "b" is declared twice`) {
		t.Fatalf("err = %v", err)
	}
}

func TestRouteAllSendsNamedBackendsToTheTransport(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn(`{"label":"neg","score":0}`, 3, 3)}})
	p := compile(t, `
name = "named"
[[intelligence.backends]]
name = "claude"
provider = "anthropic"
model = "claude-test-1"
api_key_env = "KILN_TEST_NO_SUCH_KEY"
[[nodes]]
id = "judge"
type = "llm_infer"
backend = "claude"
prompt = "x"
output_schema = "schemas/label.json"
`, schemaAssets)
	e := &runtime.Engine{}
	if err := llm.SetupRouteAll(&runtime.Host{Engine: e, Program: p}, sock); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, runOnce(t, e, p, nil), runtime.StatusCompleted)
	if srv.Calls() != 1 || srv.Requests()[0].Model != "claude" {
		t.Fatalf("calls = %d, requests = %+v", srv.Calls(), srv.Requests())
	}
	if err := llm.SetupRouteAll(&runtime.Host{Engine: &runtime.Engine{}, Program: p}, ""); err == nil || !strings.Contains(err.Error(), "needs --intel-unix") {
		t.Fatalf("route-all without a transport: %v", err)
	}
}
