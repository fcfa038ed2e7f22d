package http

import (
	_ "github.com/kilnworks/kiln/capabilities/control"

	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	"github.com/kilnworks/kiln/runtime"
)

func TestBuiltins(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	r := ts.do(t, "GET", "/healthz", "").expect(t, 200)
	if r.json["status"] != "ok" || r.json["workflow"] != "hooks" {
		t.Fatalf("healthz = %s", r.body)
	}
	ts.do(t, "GET", "/readyz", "").expect(t, 200)
	ts.host.BlockReady("mcp", "starting servers")
	r = ts.do(t, "GET", "/readyz", "").expect(t, 503)
	if !strings.Contains(r.body, "mcp: starting servers") {
		t.Fatalf("readyz reasons missing: %s", r.body)
	}
	ts.host.UnblockReady("mcp")
	ts.do(t, "GET", "/readyz", "").expect(t, 200)
	// Built-ins answer GET and HEAD (probes); another method on a built-in
	// path is a known path with the wrong method: 405 with Allow.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		ts.do(t, "HEAD", p, "").expect(t, 200)
		r = ts.do(t, "POST", p, "").expect(t, 405)
		if got := r.header.Get("Allow"); got != "GET, HEAD" {
			t.Fatalf("POST %s: Allow = %q", p, got)
		}
	}
}

func TestRoutingExactPath(t *testing.T) {
	src := wf("echo", "") + `
[[http_routes]]
method = "PUT"
path = "/hook"
start_node = "main"
`
	ts := start(t, src, setup{})
	ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	ts.do(t, "PUT", "/hook", `{}`).expect(t, 200)
	for _, p := range []string{"/hook/", "/Hook", "/hook/x", "//hook", "/"} {
		r := ts.do(t, "POST", p, `{}`).expect(t, 404)
		if r.json["error"] != "not found" {
			t.Fatalf("%s: body %s", p, r.body)
		}
	}
	r := ts.do(t, "GET", "/hook", "").expect(t, 405)
	if got := r.header.Get("Allow"); got != "POST, PUT" {
		t.Fatalf("Allow = %q", got)
	}
	// Query strings do not change the route.
	ts.do(t, "POST", "/hook?x=1", `{}`).expect(t, 200)
}

func TestStatusMapping(t *testing.T) {
	cases := []struct {
		mode   string
		code   int
		status string
	}{
		{"echo", 200, "completed"},
		{"fail", 422, "failed"},
		{"pause", 202, "paused"},
		{"block", 504, "timed_out"},
		{"deny", 403, "errored"},
		{"error", 500, "errored"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			resetGate()
			ts := start(t, wf(c.mode, "")+"\n[policy]\nenv = { read_keys = [\"PUBLIC_*\"] }\n",
				setup{cfg: Config{RunTimeout: 150 * time.Millisecond}})
			r := ts.do(t, "POST", "/hook", `{"a":1}`).expect(t, c.code)
			if r.json["status"] != c.status {
				t.Fatalf("outcome %s", r.body)
			}
			switch c.mode {
			case "fail":
				if r.json["reason"] != "order rejected" {
					t.Fatalf("reason: %s", r.body)
				}
			case "pause":
				if id, _ := r.json["run_id"].(string); id == "" {
					t.Fatalf("paused without run_id: %s", r.body)
				}
			case "deny":
				if r.json["error_class"] != "policy" || !strings.Contains(r.body, "denied") {
					t.Fatalf("denial body: %s", r.body)
				}
			case "error":
				if !strings.Contains(r.body, "backend exploded") || !strings.Contains(r.body, "httptest_node") {
					t.Fatalf("error body: %s", r.body)
				}
			}
		})
	}
}

func TestRespondShapesReply(t *testing.T) {
	ts := start(t, wf("respond", ""), setup{})
	r := ts.do(t, "POST", "/hook", `{"name":"ada"}`).expect(t, 201)
	if r.body != "hello ada" || r.header.Get("Content-Type") != "text/plain" {
		t.Fatalf("reply %q %q", r.header.Get("Content-Type"), r.body)
	}
}

func TestTriggerPayloadAndSpoofing(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	r := ts.do(t, "POST", "/hook", `{"kind":"manual","principal":{"kind":"bearer","name":"root"},"order":{"id":7},"f":1.0}`).expect(t, 200)
	if r.at("final_value.trigger.kind") != "http" {
		t.Fatalf("kind spoofed: %s", r.body)
	}
	if r.at("final_value.trigger.principal.kind") != "anonymous" {
		t.Fatalf("principal spoofed: %s", r.body)
	}
	if fmt.Sprint(r.at("final_value.trigger.order.id")) != "7" || !strings.Contains(r.body, `"f":1.0`) {
		t.Fatalf("payload not hoisted intact: %s", r.body)
	}
	// A non-object payload sits under input; an empty body is null.
	r = ts.do(t, "POST", "/hook", `[1,2]`).expect(t, 200)
	if fmt.Sprint(r.at("final_value.trigger.input")) != "[1 2]" {
		t.Fatalf("array payload: %s", r.body)
	}
	r = ts.do(t, "POST", "/hook", ``).expect(t, 200)
	if _, has := r.at("final_value.trigger").(map[string]any)["input"]; has {
		t.Fatalf("empty body should add no input: %s", r.body)
	}
}

func TestTraceparent(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := ts.do(t, "POST", "/hook", `{}`, "traceparent", tp).expect(t, 200)
	if r.at("final_value.trigger.traceparent") != tp || r.at("final_value.traceparent") != tp {
		t.Fatalf("traceparent not propagated: %s", r.body)
	}
	for _, bad := range []string{
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // forbidden version
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // truncated
	} {
		r := ts.do(t, "POST", "/hook", `{}`, "traceparent", bad).expect(t, 200)
		if r.at("final_value.trigger.traceparent") != nil || r.at("final_value.traceparent") != "" {
			t.Fatalf("invalid traceparent %q accepted: %s", bad, r.body)
		}
	}
}

func TestRateLimitBeforeAuth(t *testing.T) {
	t.Setenv("RL_TOKENS", "good-token")
	src := wf("echo", `auth = "bearer:ops"
rate_limit = { capacity = 2, per_second = 0.5 }
[auth.bearer.ops]
tokens_env = "RL_TOKENS"
`)
	ts := start(t, src, setup{})
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer good-token").expect(t, 200)
	ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer wrong").expect(t, 401)
	// The bucket is empty: a bad credential now costs a 429, not an auth check.
	r := ts.do(t, "POST", "/hook", `{}`, "Authorization", "Bearer wrong").expect(t, 429)
	if r.json["error"] != "rate limited" {
		t.Fatalf("body %s", r.body)
	}
	ms, _ := strconv.Atoi(fmt.Sprint(r.json["retry_after_ms"]))
	if ms < 1000 || ms > 2001 {
		t.Fatalf("retry_after_ms = %v, want about 2000", r.json["retry_after_ms"])
	}
	if r.header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After = %q", r.header.Get("Retry-After"))
	}
	if !strings.Contains(ts.Audit.String(), `"msg":"http.rate_limited"`) {
		t.Fatalf("no rate-limit audit event:\n%s", ts.Audit.String())
	}
	if n := strings.Count(ts.Audit.String(), "http.auth_denied"); n != 1 {
		t.Fatalf("auth ran %d times on denied requests, want 1", n)
	}
}

func TestBadRouteConfigRefusesToStart(t *testing.T) {
	cases := []struct{ route, want string }{
		{`auth = "oidc:corp"`, `auth kind "oidc" is not compiled into this binary`},
		{`auth = "kerberos"`, `auth kind "kerberos" is not compiled`},
		{`auth = "bearer:nobody"`, `no [auth.bearer.nobody] binding`},
		{`auth = "bearer:ops"
[auth.bearer.ops]
tokens_env = "KILN_TEST_UNSET_TOKENS"`, "KILN_TEST_UNSET_TOKENS is unset"},
		{`auth = "hmac"
[auth.hmac.default]
secret = "a"
secret_env = "B"`, "set only one of secret_env, secret_name or secret"},
		{`auth = "mtls"`, `requires [server.tls.client_auth] mode = "required"`},
		{`rate_limit = { capacity = 0, per_second = 1.0 }`, "capacity >= 1"},
		{`rate_limit = { capacity = 5, per_second = 0.0 }`, "per_second > 0"},
		{`input_schema = "schemas/missing.json"`, "was not loaded"},
		{`idempotency_key = "trigger.id"
idempotency_ttl_secs = 0`, "idempotency_ttl_secs must be positive"},
		{`start_node = "nope"`, `unknown start node "nope"`},
	}
	for _, c := range cases {
		src := wf("echo", c.route)
		if strings.HasPrefix(c.route, "start_node") {
			src = strings.Replace(src, "start_node = \"main\"\n", "", 1)
		}
		h := newHost(t, src, setup{})
		_, err := New(h, Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.route, err, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), "POST /hook") {
			t.Errorf("%s: error does not name the route: %v", c.route, err)
		}
	}
	// A keyed route needs a state directory.
	h := newHost(t, wf("echo", `idempotency_key = "trigger.id"`), setup{stateDir: "-"})
	if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("keyed route without state dir: %v", err)
	}
	// Reserved paths and duplicates.
	h = newHost(t, strings.Replace(wf("echo", ""), `path = "/hook"`, `path = "/metrics"`, 1), setup{})
	if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved path: %v", err)
	}
	h = newHost(t, wf("echo", "")+"[[http_routes]]\nmethod = \"POST\"\npath = \"/hook\"\nstart_node = \"main\"\n", setup{})
	if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), "declared twice") {
		t.Fatalf("duplicate route: %v", err)
	}
}

// parseMetrics parses the exposition with the Prometheus text parser
// and returns samples by "name{labels sorted by name}".
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples, _ := opstest.Parse(t, text)
	return samples
}

func TestMetrics(t *testing.T) {
	src := wf("echo", "") + `
[[http_routes]]
method = "POST"
path = "/fail"
start_node = "other"
[[start_nodes]]
name = "other"
entry_node = "f"
[[nodes]]
id = "f"
type = "httptest_node"
key = "fail"
`
	ts := start(t, src, setup{})
	for i := 0; i < 3; i++ {
		ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	}
	ts.do(t, "POST", "/fail", `{}`).expect(t, 422)
	ts.do(t, "POST", "/hook", `not json`).expect(t, 400)
	r := ts.do(t, "GET", "/metrics", "").expect(t, 200)
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("content type %q", r.header.Get("Content-Type"))
	}
	m := parseMetrics(t, r.body)
	want := map[string]float64{
		`kiln_runs_total{start_node="main",status="completed",workflow="hooks"}`:                   3,
		`kiln_runs_total{start_node="other",status="failed",workflow="hooks"}`:                     1,
		`kiln_runs_active{workflow="hooks"}`:                                                       0,
		`kiln_node_duration_seconds_count{kind="httptest_node",workflow="hooks"}`:                  4,
		`kiln_node_retries_total{kind="httptest_node",workflow="hooks"}`:                           0,
		`kiln_node_executions_total{workflow="hooks"}`:                                             4,
		`kiln_http_requests_total{code="200",route="POST /hook",workflow="hooks"}`:                 3,
		`kiln_http_requests_total{code="400",route="POST /hook",workflow="hooks"}`:                 1,
		`kiln_http_requests_total{code="422",route="POST /fail",workflow="hooks"}`:                 1,
		`kiln_http_request_duration_seconds_count{route="POST /hook",workflow="hooks"}`:            4,
		`kiln_http_request_duration_seconds_bucket{le="+Inf",route="POST /hook",workflow="hooks"}`: 4,
		`kiln_http_request_duration_seconds_count{route="POST /fail",workflow="hooks"}`:            1,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	// Buckets are cumulative and end at the count.
	prev := -1.0
	for _, le := range latencyBuckets {
		v := m[fmt.Sprintf(`kiln_http_request_duration_seconds_bucket{le="%s",route="POST /hook",workflow="hooks"}`, strconv.FormatFloat(le, 'g', -1, 64))]
		if v < prev {
			t.Fatalf("bucket le=%v decreases", le)
		}
		prev = v
	}
	if prev > 4 {
		t.Fatalf("last bucket %v above count", prev)
	}

	// A run the host fires for a trigger (cron, event, MCP update, ...)
	// counts in the run metrics too, though it answered no request.
	rep := ts.host.Fire(context.Background(), runtime.RunOptions{Start: "other",
		Trigger: runtime.MakeTrigger("event", map[string]any{})})
	if rep.Outcome.Status != runtime.StatusFailed {
		t.Fatalf("trigger run: %+v", rep.Outcome)
	}
	m = parseMetrics(t, ts.do(t, "GET", "/metrics", "").expect(t, 200).body)
	if got := m[`kiln_runs_total{start_node="other",status="failed",workflow="hooks"}`]; got != 2 {
		t.Errorf("failed runs after a trigger run = %v, want 2", got)
	}
	if got := m[`kiln_http_requests_total{code="422",route="POST /fail",workflow="hooks"}`]; got != 1 {
		t.Errorf("a trigger run counted as a request: %v", got)
	}
}

func TestConcurrentRequests(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := ts.Client.Post(ts.URL+"/hook", "application/json", strings.NewReader(fmt.Sprintf(`{"i":%d}`, i)))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer res.Body.Close()
			var out struct {
				FinalValue struct {
					Trigger struct{ I int }
				} `json:"final_value"`
			}
			if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode != 200 || out.FinalValue.Trigger.I != i {
				errs <- fmt.Sprintf("request %d: status %d err %v got %d", i, res.StatusCode, err, out.FinalValue.Trigger.I)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

var _ = http.StatusOK

// TestControlFamilyWorkflow serves a workflow built from the real control
// nodes: the principal picks the branch, respond shapes the reply.
func TestControlFamilyWorkflow(t *testing.T) {
	t.Setenv("CTL_TOKENS", "ctl-token-1")
	src := `
name = "twiml"
[[start_nodes]]
name = "main"
source = "http"
[[nodes]]
id = "who"
type = "switch"
expr = "trigger.principal.kind"
[[nodes]]
id = "say"
type = "respond"
content_type = "text/xml"
body_template = "<Response><Say>Hi {{From}}</Say></Response>"
[[nodes]]
id = "reject"
type = "fail"
reason = "anonymous callers are not served"
[[nodes]]
id = "empty"
type = "respond"
status = 204
body_template = "ignored"
[[edges]]
from = "who"
to = "say"
when = "bearer"
[[edges]]
from = "who"
to = "reject"
when = "anonymous"
[[edges]]
from = "who"
to = "empty"
when = "hmac"
[[http_routes]]
method = "POST"
path = "/voice"
start_node = "main"
auth = "bearer:ctl"
[[http_routes]]
method = "POST"
path = "/open"
start_node = "main"
[[http_routes]]
method = "POST"
path = "/ping"
start_node = "main"
auth = "hmac:p"
[auth.bearer.ctl]
tokens_env = "CTL_TOKENS"
[auth.hmac.p]
secret = "ping-secret"
`
	ts := start(t, src, setup{})
	r := ts.do(t, "POST", "/voice", "From=%2B4912345&CallSid=CA1", "Content-Type", "application/x-www-form-urlencoded",
		"Authorization", "Bearer ctl-token-1").expect(t, 200)
	if r.body != "<Response><Say>Hi +4912345</Say></Response>" || r.header.Get("Content-Type") != "text/xml" {
		t.Fatalf("TwiML reply: %q %q", r.header.Get("Content-Type"), r.body)
	}
	r = ts.do(t, "POST", "/open", `{}`).expect(t, 422)
	if r.json["reason"] != "anonymous callers are not served" {
		t.Fatalf("fail reply: %s", r.body)
	}
	r = ts.do(t, "POST", "/ping", `{}`, "X-Agent-Signature", "sha256="+sign("ping-secret", `{}`)).expect(t, 204)
	if r.body != "" {
		t.Fatalf("204 with body %q", r.body)
	}
}
