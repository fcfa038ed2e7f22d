package httpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func program(t *testing.T, src string) *runtime.Program {
	t.Helper()
	var wf workflow.Workflow
	md, err := toml.Decode(src, &wf)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded %v", und)
	}
	p, err := runtime.Compile(&wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wf is a one-node http_request workflow; policy and headers are TOML. A
// POST sends trigger.body.
func wf(method, policy, headers string) string {
	body := ""
	if method == "POST" {
		body = `body_from = "trigger.body"`
	}
	return fmt.Sprintf(`
name = "http"
%s
[[nodes]]
id = "req"
type = "http_request"
method = %q
url_from = "trigger.url"
%s
%s
`, policy, method, body, headers)
}

func allow(url string) string {
	return fmt.Sprintf("[policy.http]\nurls = [%q]", url+"/**")
}

type result struct {
	rep    *runtime.Report
	out    map[string]any
	branch any
	audit  string
}

func run(t *testing.T, p *runtime.Program, payload map[string]any, opts runtime.RunOptions) result {
	t.Helper()
	var logBuf bytes.Buffer
	audit, closer, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: &logBuf, Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	opts.Trigger = runtime.MakeTrigger("manual", runtime.Normalize(payload))
	rep := (&runtime.Engine{Audit: audit}).Run(context.Background(), p, opts)
	r := result{rep: rep, audit: logBuf.String()}
	if n := len(rep.Trace.Entries); n > 0 {
		r.out, _ = rep.Trace.Entries[0].Output.(map[string]any)
		r.branch = rep.Trace.Entries[0].Branch
	}
	return r
}

func TestGetOutputShape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Custom-Thing", "yes")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		fmt.Fprint(w, `{"hello":"world"}`)
	}))
	defer srv.Close()
	p := program(t, wf("get", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL + "/x"}, runtime.RunOptions{})
	if r.rep.Outcome.Status != runtime.StatusCompleted || r.branch != nil {
		t.Fatalf("outcome %+v", r.rep.Outcome)
	}
	h := r.out["headers"].(map[string]any)
	if r.out["status"] != json.Number("200") || r.out["body"] != `{"hello":"world"}` || r.out["bytes"] != json.Number("17") ||
		h["x-custom-thing"] != "yes" || h["set-cookie"] != "a=1, b=2" {
		t.Fatalf("output %v", r.out)
	}
}

func TestPostJSONBody(t *testing.T) {
	var got, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, ctype = string(b), r.Header.Get("Content-Type")
		w.WriteHeader(201)
	}))
	defer srv.Close()
	p := program(t, wf("POST", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL, "body": map[string]any{"n": 1.0, "s": "<b>"}}, runtime.RunOptions{})
	if r.out["status"] != json.Number("201") || got != `{"n":1.0,"s":"<b>"}` || ctype != "application/json" {
		t.Fatalf("status %v body %q type %q", r.out["status"], got, ctype)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	var followed atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Store(true)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL + "/start"}, runtime.RunOptions{})
	if followed.Load() {
		t.Fatal("redirect was followed")
	}
	if r.branch != "error" || r.out["status"] != json.Number("302") || r.out["headers"].(map[string]any)["location"] != "/elsewhere" {
		t.Fatalf("branch %v output %v", r.branch, r.out)
	}
}

func TestNon2xxRoutesErrorBranch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if r.branch != "error" || r.out["status"] != json.Number("503") || r.out["body"] != "nope\n" {
		t.Fatalf("branch %v output %v", r.branch, r.out)
	}
}

func TestSecretHeaderDeliveredButNeverEchoed(t *testing.T) {
	const secret = "tok-3b1f9e-very-secret"
	t.Setenv("KILN_HTTPCLIENT_TEST_TOKEN", secret)
	var delivered string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered = r.Header.Get("Authorization")
		// A careless server echoes the credential back.
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "you sent %s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), `[nodes.headers]
Authorization = "Bearer {{secret:KILN_HTTPCLIENT_TEST_TOKEN}}"
X-Api-Version = "58.0"
X-Literal = "{{not.a.secret}}"`))
	r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if delivered != "Bearer "+secret {
		t.Fatalf("server got %q", delivered)
	}
	if r.rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", r.rep.Outcome)
	}
	// The output is data: it keeps what the server sent. Redaction is the
	// sinks' part (RedactJSON for the outcome and record the CLI prints).
	if r.out["body"] != "you sent Bearer "+secret || r.out["headers"].(map[string]any)["x-echo"] != "Bearer "+secret {
		t.Fatalf("output %v", r.out)
	}
	outcome, _ := json.Marshal(r.rep.Outcome)
	record, err := r.rep.Record()
	if err != nil {
		t.Fatal(err)
	}
	outcome, record = runtime.RedactJSON(outcome), runtime.RedactJSON(record)
	if !json.Valid(record) || !strings.Contains(string(record), "you sent Bearer [REDACTED]") {
		t.Fatalf("record not redacted at the sink:\n%s", record)
	}
	for what, text := range map[string]string{"outcome": string(outcome), "record": string(record), "audit log": r.audit} {
		if strings.Contains(text, secret) {
			t.Fatalf("secret leaked into the %s:\n%s", what, text)
		}
	}
	if !strings.Contains(r.audit, "workflow.completed") {
		t.Fatalf("audit log empty?\n%s", r.audit)
	}
}

func TestSecretHeaderFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("request sent despite a bad header")
	}))
	defer srv.Close()
	t.Setenv("KILN_HTTPCLIENT_TEST_CRLF", "abc\r\nX-Injected: 1")
	p := program(t, wf("GET", allow(srv.URL), "[nodes.headers]\nX-Key = \"{{secret:KILN_HTTPCLIENT_TEST_CRLF}}\""))
	r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if o := r.rep.Outcome; o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "node req (http_request): header X-Key: secret KILN_HTTPCLIENT_TEST_CRLF contains CR") ||
		strings.Contains(o.Reason, "Injected") {
		t.Fatalf("outcome %+v", o)
	}
	p = program(t, wf("GET", allow(srv.URL), "[nodes.headers]\nX-Key = \"{{secret:KILN_HTTPCLIENT_TEST_UNSET}}\""))
	r = run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if o := r.rep.Outcome; o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "secret KILN_HTTPCLIENT_TEST_UNSET is not set") {
		t.Fatalf("outcome %+v", o)
	}
	// The secrets registry, when installed, is what resolves placeholders.
	e := &runtime.Engine{Services: &runtime.Services{Secret: func(name string) (string, error) {
		return "", fmt.Errorf("secret %s: registry says no", name)
	}}}
	rep := e.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", map[string]any{"url": srv.URL})})
	if !strings.Contains(rep.Outcome.Reason, "registry says no") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}

func TestLoadTimeHeaderChecks(t *testing.T) {
	for name, headers := range map[string]string{
		"CR/LF literal":  "[nodes.headers]\nX-A = \"a\\r\\nX-B: b\"",
		"bad name":       "[nodes.headers]\n\"X A\" = \"v\"",
		"reserved":       "[nodes.headers]\nHost = \"evil\"",
		"bad secret ref": "[nodes.headers]\nX-A = \"{{secret:}}\"",
	} {
		var w workflow.Workflow
		if _, err := toml.Decode(wf("GET", "", headers), &w); err != nil {
			t.Fatal(err)
		}
		_, err := runtime.Compile(&w, runtime.CompileOptions{})
		if err == nil || !strings.Contains(err.Error(), "node req (http_request)") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func TestSSRFGuard(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	for name, tc := range map[string]struct{ policy, url string }{
		"allow-all, no [policy]":      {"", srv.URL},
		"wildcard policy":             {"[policy.http]\nurls = [\"*\"]", srv.URL},
		"pattern not naming the host": {"[policy.http]\nurls = [\"http://*\"]", srv.URL},
		// The name is checked after DNS: localhost is loopback too.
		"hostname resolving to loopback": {"[policy.http]\nurls = [\"*\"]", "http://localhost:" + port + "/"},
	} {
		p := program(t, wf("GET", tc.policy, ""))
		r := run(t, p, map[string]any{"url": tc.url}, runtime.RunOptions{})
		o := r.rep.Outcome
		if o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "loopback address") ||
			!strings.Contains(o.Reason, "denied") || o.Err.Class != runtime.ClassPolicy {
			t.Fatalf("%s: outcome %+v", name, o)
		}
		if r.rep.Counters.Snapshot()["policy_denials"] != 1 || !strings.Contains(r.audit, "policy.denied") {
			t.Fatalf("%s: denial not counted/audited", name)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("guarded requests reached the server %d times", hits.Load())
	}
	// Naming the host explicitly lets the request through.
	p := program(t, wf("GET", allow(srv.URL), ""))
	if r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{}); r.rep.Outcome.Status != runtime.StatusCompleted || hits.Load() != 1 {
		t.Fatalf("explicit: %+v", r.rep.Outcome)
	}
}

// TestSSRFGuardNamedHost: naming a host lets it reach loopback (through
// DNS too), but an address that needs its literal named stays refused
// for a named host: the named client is guarded, not direct. 0.0.0.0
// stands in for the metadata addresses (it is in the same class and, on
// Linux, a connection to it reaches the loopback test server).
func TestSSRFGuardNamedHost(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	// A named hostname resolving to loopback is allowed.
	localhost := "http://localhost:" + port
	p := program(t, wf("GET", allow(localhost), ""))
	if r := run(t, p, map[string]any{"url": localhost + "/x"}, runtime.RunOptions{}); r.rep.Outcome.Status != runtime.StatusCompleted || hits.Load() != 1 {
		t.Fatalf("named localhost: %+v", r.rep.Outcome)
	}

	// The named client with a named-host reach, as for a hostname whose
	// DNS answer is 0.0.0.0: refused at the dial.
	req, _ := http.NewRequestWithContext(netguard.WithReach(context.Background(), netguard.Reach{Named: true}),
		"GET", "http://0.0.0.0:"+port+"/", nil)
	_, err := named.Do(req)
	var blocked *netguard.Blocked
	if !errors.As(err, &blocked) || !blocked.LiteralOnly || hits.Load() != 1 {
		t.Fatalf("named client to 0.0.0.0: %v (hits %d)", err, hits.Load())
	}

	// Not named: refused, with the hint that only the literal opens it.
	unspec := "http://0.0.0.0:" + port
	p = program(t, wf("GET", "[policy.http]\nurls = [\"http://*\"]", ""))
	r := run(t, p, map[string]any{"url": unspec + "/"}, runtime.RunOptions{})
	if o := r.rep.Outcome; o.Status != runtime.StatusErrored || o.Err.Class != runtime.ClassPolicy ||
		!strings.Contains(o.Reason, "unspecified (this network) address 0.0.0.0; only a [policy.http] url naming this IP literal allows it") {
		t.Fatalf("0.0.0.0 not named: %+v", o)
	}
	// Naming the exact literal opens it.
	p = program(t, wf("GET", allow(unspec), ""))
	if r := run(t, p, map[string]any{"url": unspec + "/"}, runtime.RunOptions{}); r.rep.Outcome.Status != runtime.StatusCompleted || hits.Load() != 2 {
		t.Fatalf("0.0.0.0 named as a literal: %+v (hits %d)", r.rep.Outcome, hits.Load())
	}
}

// TestIdempotencyKey: every request carries the node's key, the same on
// a retry; a key the node declares (any case) is sent instead, alone.
func TestIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys [][]string
	var fail atomic.Int64 // requests to drop without an answer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Values("Idempotency-Key"))
		mu.Unlock()
		if fail.Add(-1) >= 0 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // a transport error: the engine retries
			}
		}
	}))
	defer srv.Close()
	retry := "[nodes.retry]\nmax_attempts = 3\nbackoff_ms = 0"
	take := func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		k := keys
		keys = nil
		return k
	}

	fail.Store(2)
	p := program(t, wf("POST", allow(srv.URL), retry))
	opts := runtime.RunOptions{ExecutionID: "run-idem-1"}
	r := run(t, p, map[string]any{"url": srv.URL, "body": "pay"}, opts)
	got := take()
	sum := sha256.Sum256([]byte("run-idem-1.req")) // run id "." node id
	want := hex.EncodeToString(sum[:])
	if r.rep.Outcome.Status != runtime.StatusCompleted || len(got) != 3 || !strings.Contains(r.audit, "node.retry") {
		t.Fatalf("outcome %+v, %d requests", r.rep.Outcome, len(got))
	}
	for i, k := range got {
		if len(k) != 1 || k[0] != want {
			t.Fatalf("attempt %d sent Idempotency-Key %q, want [%s]", i+1, k, want)
		}
	}
	// Another run, another key.
	fail.Store(0)
	run(t, p, map[string]any{"url": srv.URL, "body": "pay"}, runtime.RunOptions{ExecutionID: "run-idem-2"})
	if got := take(); len(got) != 1 || len(got[0]) != 1 || got[0][0] == want || len(got[0][0]) != 64 {
		t.Fatalf("second run sent %q", got)
	}
	// Declared by the workflow, in any case: that value alone.
	p = program(t, wf("POST", allow(srv.URL), "[nodes.headers]\nidempotency-KEY = \"order-42\""))
	run(t, p, map[string]any{"url": srv.URL, "body": "pay"}, opts)
	if got := take(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "order-42" {
		t.Fatalf("declared key: sent %q", got)
	}
}

func TestPolicyCheckedBeforeDialling(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	p := program(t, wf("DELETE", allow(srv.URL)+"\nmethods = [\"GET\"]", ""))
	r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if r.rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.rep.Outcome.Reason, "method not allowed") || hits.Load() != 0 {
		t.Fatalf("outcome %+v hits %d", r.rep.Outcome, hits.Load())
	}
	// Dry run: still checked, never sent.
	p = program(t, wf("GET", allow(srv.URL), ""))
	r = run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{DryRun: true})
	if r.out["dry_run"] != true || hits.Load() != 0 {
		t.Fatalf("dry run output %v hits %d", r.out, hits.Load())
	}
}

func TestBodyCaps(t *testing.T) {
	size := MaxBody
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(bytes.Repeat([]byte("a"), size))
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	if r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{}); r.out["bytes"] != json.Number(fmt.Sprint(MaxBody)) {
		t.Fatalf("exactly 1 MiB: %+v", r.rep.Outcome)
	}
	size = MaxBody + 1
	if r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{}); !strings.Contains(r.rep.Outcome.Reason, "response body exceeds the 1 MiB cap") {
		t.Fatalf("1 MiB + 1: %+v", r.rep.Outcome)
	}
	before := hits.Load()
	p = program(t, wf("POST", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL, "body": strings.Repeat("b", MaxBody+1)}, runtime.RunOptions{})
	if !strings.Contains(r.rep.Outcome.Reason, "request body of 1048577 bytes exceeds the 1 MiB cap") || hits.Load() != before {
		t.Fatalf("request cap: %+v", r.rep.Outcome)
	}
}

func TestTimeouts(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	old := Timeout
	Timeout = 200 * time.Millisecond
	defer func() { Timeout = old }()
	p := program(t, wf("GET", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{})
	if o := r.rep.Outcome; o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "no complete response within 200ms") {
		t.Fatalf("request timeout: %+v", o)
	}
	Timeout = old
	start := time.Now()
	r = run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{Timeout: 200 * time.Millisecond})
	if r.rep.Outcome.Status != runtime.StatusTimedOut || time.Since(start) > 2*time.Second {
		t.Fatalf("run deadline: %+v", r.rep.Outcome)
	}
}

func TestTraceparentForwarded(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Traceparent"))
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	run(t, p, map[string]any{"url": srv.URL, "traceparent": tp}, runtime.RunOptions{})
	if got.Load() != tp {
		t.Fatalf("forwarded %q", got.Load())
	}
	run(t, p, map[string]any{"url": srv.URL, "traceparent": "garbage"}, runtime.RunOptions{})
	if got.Load() != "" {
		t.Fatalf("invalid traceparent forwarded: %q", got.Load())
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "over tls")
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	// An untrusted certificate fails closed.
	if r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{}); !strings.Contains(r.rep.Outcome.Reason, "certificate") {
		t.Fatalf("untrusted: %+v", r.rep.Outcome)
	}
	setRootCAs(srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs)
	defer setRootCAs(nil)
	if r := run(t, p, map[string]any{"url": srv.URL}, runtime.RunOptions{}); r.out["body"] != "over tls" {
		t.Fatalf("trusted: %+v", r.rep.Outcome)
	}
}

func TestMissingBodyIsAnError(t *testing.T) {
	p := program(t, wf("POST", "", ""))
	r := run(t, p, map[string]any{"url": "http://192.0.2.1/"}, runtime.RunOptions{})
	if !strings.Contains(r.rep.Outcome.Reason, `node req (http_request): body_from "trigger.body" did not resolve`) {
		t.Fatalf("outcome %+v", r.rep.Outcome)
	}
}

func TestURLMustResolveToString(t *testing.T) {
	p := program(t, wf("GET", "", ""))
	r := run(t, p, map[string]any{"url": 42}, runtime.RunOptions{})
	if !strings.Contains(r.rep.Outcome.Reason, "node req (http_request): url_from") {
		t.Fatalf("outcome %+v", r.rep.Outcome)
	}
}
