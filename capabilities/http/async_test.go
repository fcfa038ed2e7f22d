package http

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

var runIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// accepted checks a 202 from an async route and returns the run's id.
func accepted(t *testing.T, r resp) string {
	t.Helper()
	r.expect(t, 202)
	id, _ := r.json["execution_id"].(string)
	if !runIDRE.MatchString(id) || r.json["status_url"] != "/v1/runs/"+id || r.header.Get("Location") != "/v1/runs/"+id {
		t.Fatalf("202 body %s, Location %q", r.body, r.header.Get("Location"))
	}
	return id
}

// pollEnded polls the status URL until the run ended.
func pollEnded(t *testing.T, ts *testServer, id string, headers ...string) resp {
	t.Helper()
	var r resp
	waitFor(t, func() bool {
		r = ts.do(t, "GET", "/v1/runs/"+id, "", headers...)
		return r.code == 200 && r.json["state"] == runtime.RunEnded
	})
	return r
}

// TestAsyncRoute: an async route answers 202 at once with the run's id
// and status URL while the run is still going; the status shows it
// running, then ended with the reply the route would have sent.
func TestAsyncRoute(t *testing.T) {
	g := resetGate()
	ts := start(t, wf("block", `reply = "async"`), setup{})
	r := ts.do(t, "POST", "/hook", `{"n":1}`, "X-Request-Id", "req-7")
	id := accepted(t, r)
	if r.header.Get("X-Request-Id") != "req-7" {
		t.Errorf("request id not echoed on the 202")
	}
	// The run is blocked on the gate, yet the reply came: it is running.
	st := ts.do(t, "GET", "/v1/runs/"+id, "").expect(t, 200)
	if s := st.json["state"]; s != runtime.RunRunning && s != runtime.RunAccepted {
		t.Fatalf("state %v before the run could end: %s", s, st.body)
	}
	if _, ok := st.json["outcome"]; ok || st.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status before the end: %s (Cache-Control %q)", st.body, st.header.Get("Cache-Control"))
	}
	close(g)
	st = pollEnded(t, ts, id)
	if st.at("execution_id") != id || st.at("outcome.http_status") != json.Number("200") ||
		st.at("outcome.body.final_value.released") != true || st.at("outcome.body.status") != "completed" {
		t.Fatalf("ended status: %s", st.body)
	}
	// The run carried the id: its audit lines say which run they are.
	if !strings.Contains(ts.Audit.String(), `"execution_id":"`+id+`"`) {
		t.Error("the run's audit lines do not carry its id")
	}
	// Unknown and malformed ids: 404 (the route is open, so nothing to hide).
	for _, p := range []string{"/v1/runs/" + strings.Repeat("0", 32), "/v1/runs/" + id[:31], "/v1/runs/../../etc", "/v1/runs", "/v1/runs/"} {
		ts.do(t, "GET", p, "").expect(t, 404)
	}
}

// TestAsyncOutcomes: a failed run and a respond node's non-JSON reply are
// recorded as the route would have replied them.
func TestAsyncOutcomes(t *testing.T) {
	ts := start(t, wf("fail", `reply = "async"`), setup{})
	st := pollEnded(t, ts, accepted(t, ts.do(t, "POST", "/hook", `{}`)))
	if st.at("outcome.http_status") != json.Number("422") || st.at("outcome.body.status") != "failed" {
		t.Fatalf("failed run: %s", st.body)
	}
	ts = start(t, wf("respond", `reply = "async"`), setup{})
	st = pollEnded(t, ts, accepted(t, ts.do(t, "POST", "/hook", `{"name":"ann"}`)))
	if st.at("outcome.http_status") != json.Number("201") || st.at("outcome.content_type") != "text/plain" || st.at("outcome.body") != "hello ann" {
		t.Fatalf("respond run: %s", st.body)
	}
}

// asyncAuthWF has two async routes guarded by different bearer bindings
// and a sync route guarded by a third.
const asyncAuthWF = `
name = "hooks"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "n"
[[nodes]]
id = "n"
type = "httptest_node"
key = "echo"
[[http_routes]]
method = "POST"
path = "/a"
start_node = "main"
reply = "async"
auth = "bearer:a"
[[http_routes]]
method = "POST"
path = "/b"
start_node = "main"
reply = "async"
auth = "bearer:b"
[[http_routes]]
method = "POST"
path = "/sync"
start_node = "main"
auth = "bearer:s"
[auth.bearer.a]
tokens = ["token-a-1111"]
[auth.bearer.b]
tokens = ["token-b-2222"]
[auth.bearer.s]
tokens = ["token-s-3333"]
`

// TestAsyncStatusAuth: a run's status is guarded by the auth of the route
// that accepted it. An id without a record is guarded by every async
// route's auth, and every refusal has the same body, so a caller cannot
// tell another route's run from an id that does not exist.
func TestAsyncStatusAuth(t *testing.T) {
	ts := start(t, asyncAuthWF, setup{})
	bearer := func(tok string) []string {
		if tok == "" {
			return nil
		}
		return []string{"Authorization", "Bearer " + tok}
	}
	const ta, tb, ts3 = "token-a-1111", "token-b-2222", "token-s-3333"
	ts.do(t, "POST", "/a", `{}`, bearer(tb)...).expect(t, 401)
	idA := accepted(t, ts.do(t, "POST", "/a", `{}`, bearer(ta)...))
	idB := accepted(t, ts.do(t, "POST", "/b", `{}`, bearer(tb)...))
	pollEnded(t, ts, idA, bearer(ta)...)
	pollEnded(t, ts, idB, bearer(tb)...)
	unknown := strings.Repeat("e", 32)

	var refusal string
	for _, tc := range []struct{ id, tok string }{
		{idA, ""}, {idA, tb}, {idA, ts3}, {idA, "wrong"},
		{idB, ""}, {idB, ta},
		{unknown, ""}, {unknown, ta}, {unknown, tb}, {unknown, ts3},
		{"not-an-id", ta}, {"not-an-id", ""},
	} {
		r := ts.do(t, "GET", "/v1/runs/"+tc.id, "", bearer(tc.tok)...).expect(t, 401)
		if refusal == "" {
			refusal = r.body
		}
		if r.body != refusal {
			t.Errorf("GET %s with %q: body %s differs from %s: it tells the cases apart", tc.id, tc.tok, r.body, refusal)
		}
		if strings.Contains(r.body, "final_value") || strings.Contains(r.body, "state") {
			t.Errorf("GET %s with %q: %s", tc.id, tc.tok, r.body)
		}
	}
	if st := ts.do(t, "GET", "/v1/runs/"+idA, "", bearer(ta)...).expect(t, 200); st.at("outcome.body.final_value.trigger.principal.name") != "a" {
		t.Errorf("A's run: %s", st.body)
	}
	ts.do(t, "GET", "/v1/runs/"+idB, "", bearer(tb)...).expect(t, 200)
	// Two credentials are refused as on the routes.
	req := mustRequest(t, "GET", ts.URL+"/v1/runs/"+idA, "")
	req.Header.Add("Authorization", "Bearer "+ta)
	req.Header.Add("Authorization", "Bearer "+tb)
	ts.send(t, req).expect(t, 400)
	// The refusals were audited with their reasons.
	if !strings.Contains(ts.Audit.String(), `"route":"/v1/runs","auth":"bearer:b"`) {
		t.Error("no http.auth_denied for /v1/runs")
	}

	// With one guarded async route, its callers can tell an unknown id.
	dir := t.TempDir()
	one := start(t, strings.Replace(asyncAuthWF, `reply = "async"
auth = "bearer:b"`, `auth = "bearer:b"`, 1), setup{stateDir: dir})
	one.do(t, "GET", "/v1/runs/"+unknown, "", bearer(ta)...).expect(t, 404)
	one.do(t, "GET", "/v1/runs/"+unknown, "", bearer(tb)...).expect(t, 401)
	// A record the store cannot read: 503 for a caller that could read
	// it, the 401 of a missing id for anyone else.
	if err := os.MkdirAll(filepath.Join(dir, "async"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "async", unknown+".json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	one.do(t, "GET", "/v1/runs/"+unknown, "", bearer(ta)...).expect(t, 503)
	if r := one.do(t, "GET", "/v1/runs/"+unknown, "", bearer(tb)...).expect(t, 401); r.body != refusal {
		t.Errorf("unreadable record: %s", r.body)
	}
}

// TestAsyncIdempotentReplay: a redelivery of a keyed async request gets
// the first 202 again (same run, same status URL) and starts no run.
func TestAsyncIdempotentReplay(t *testing.T) {
	ts := start(t, wf("count", `reply = "async"
idempotency_key = "trigger.id"`), setup{})
	before := runCount.Load()
	first := ts.do(t, "POST", "/hook", `{"id":"k-1"}`)
	id := accepted(t, first)
	pollEnded(t, ts, id)
	again := ts.do(t, "POST", "/hook", `{"id":"k-1"}`)
	if accepted(t, again) != id || again.header.Get("X-Idempotent-Replay") != "true" {
		t.Fatalf("redelivery: %s (replay %q)", again.body, again.header.Get("X-Idempotent-Replay"))
	}
	other := accepted(t, ts.do(t, "POST", "/hook", `{"id":"k-2"}`))
	pollEnded(t, ts, other)
	if got := runCount.Load() - before; got != 2 {
		t.Fatalf("%d runs for two keys", got)
	}
}

// TestAsyncOutcomeRedacted: a secret the run echoes never reaches the
// run store's file (a sink), nor the status reply.
func TestAsyncOutcomeRedacted(t *testing.T) {
	const secret = `async-outcome-s3cret-"q"-77aa`
	runtime.RedactValue(secret)
	for _, mode := range []string{"json", "text"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			src := strings.Replace(wf(mode, `reply = "async"`), `type = "httptest_node"`, `type = "httpredact_node"`, 1)
			ts := start(t, src, setup{stateDir: dir})
			body, _ := json.Marshal(map[string]any{"echo": "tok " + secret})
			id := accepted(t, ts.do(t, "POST", "/hook", string(body)))
			st := pollEnded(t, ts, id)
			stored, err := os.ReadFile(filepath.Join(dir, "async", id+".json"))
			if err != nil {
				t.Fatal(err)
			}
			for what, text := range map[string]string{"status": st.body, "record": string(stored)} {
				if strings.Contains(text, "async-outcome-s3cret") || !strings.Contains(text, runtime.RedactedMarker) {
					t.Fatalf("%s not redacted: %s", what, text)
				}
			}
		})
	}
}

// TestAsyncRetention: a record is gone once its route's retention passed
// (404), and the next start sweeps its file.
func TestAsyncRetention(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dir := t.TempDir()
	src := wf("count", `reply = "async"
run_retention_secs = 60`)
	h := newHost(t, src, setup{stateDir: dir})
	h.Engine.Now = clock
	buf := &syncBuffer{}
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, false)
	id := accepted(t, ts.do(t, "POST", "/hook", `{}`))
	pollEnded(t, ts, id)
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	ts.do(t, "GET", "/v1/runs/"+id, "").expect(t, 200)
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	ts.do(t, "GET", "/v1/runs/"+id, "").expect(t, 404)
	record := filepath.Join(dir, "async", id+".json")
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("record gone before any sweep: %v", err)
	}
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	s2, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, s2, buf, false)
	waitFor(t, func() bool { _, err := os.Stat(record); return os.IsNotExist(err) })
}

// TestAsyncLimits: an async route needs a run store, and the runs in
// flight are bounded (503 with Retry-After beyond).
func TestAsyncLimits(t *testing.T) {
	h := newHost(t, wf("count", `reply = "async"`), setup{stateDir: "-"})
	if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("async route without a state dir: %v", err)
	}
	g := resetGate()
	ts := start(t, wf("block", `reply = "async"`), setup{cfg: Config{MaxAsyncRuns: 1}})
	id := accepted(t, ts.do(t, "POST", "/hook", `{}`))
	full := ts.do(t, "POST", "/hook", `{}`).expect(t, 503)
	if full.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on a full server")
	}
	close(g)
	pollEnded(t, ts, id)
	waitFor(t, func() bool { return ts.try("POST", "/hook", `{}`).code == 202 })
}

// TestAsyncDrainTimeout: a drain that runs out of time cuts an async run,
// but does not drop it. The run checkpointed after each node, so its
// record says interrupted and its checkpoint stays incomplete at the node
// it had not finished; the server's next start on the same state
// continues it there (the node before it does not run again) and records
// how it ended.
func TestAsyncDrainTimeout(t *testing.T) {
	resetGate() // never released while the first server runs
	dir := t.TempDir()
	src := `
name = "hooks"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "first"
[[nodes]]
id = "first"
type = "httptest_node"
key = "count"
[[nodes]]
id = "wait"
type = "httptest_node"
key = "block"
[[edges]]
from = "first"
to = "wait"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
reply = "async"
`
	runCount.Store(0)
	ts := start(t, src, setup{stateDir: dir, cfg: Config{DrainTimeout: 300 * time.Millisecond}})
	id := accepted(t, ts.do(t, "POST", "/hook", `{"order":7}`))
	waitFor(t, func() bool { return runCount.Load() == 1 })
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	runs := runtime.NewFileRuns(dir, time.Now)
	rec, ok, err := runs.GetRun(context.Background(), id)
	if err != nil || !ok || rec.State != runtime.RunInterrupted || rec.Outcome != nil {
		t.Fatalf("record after an expired drain: %+v %v %v (%s)", rec, ok, err, rec.Outcome)
	}
	cp, err := runtime.LoadCheckpoint(dir, id)
	if err != nil || cp.State != runtime.CheckpointIncomplete || cp.NextNode != "wait" {
		t.Fatalf("checkpoint after an expired drain: %+v %v", cp, err)
	}

	close(resetGate()) // the next process's block node returns at once
	ts2 := start(t, src, setup{stateDir: dir})
	r := pollEnded(t, ts2, id)
	if r.at("outcome.http_status") != json.Number("200") || r.at("outcome.body.final_value.released") != true || r.at("outcome.body.last_node") != "wait" {
		t.Fatalf("resumed run: %s", r.body)
	}
	if n := runCount.Load(); n != 2 { // first once, wait once (on resume)
		t.Fatalf("%d counted node runs, want 2: the node before the cut ran again", n)
	}
	if !strings.Contains(ts2.Audit.String(), "http.async_resumed") {
		t.Fatalf("no http.async_resumed in the audit log:\n%s", ts2.Audit.String())
	}
	if _, err := runtime.LoadCheckpoint(dir, id); err == nil {
		t.Fatal("checkpoint of the resumed, completed run is still there")
	}
	// A third start finds nothing to resume.
	ts3 := start(t, src, setup{stateDir: dir})
	if strings.Contains(ts3.Audit.String(), "http.async_resumed") {
		t.Fatal("an ended run was resumed again")
	}
}

// TestAsyncDrainOnSIGTERM runs the real CLI: async runs accepted before a
// SIGTERM are finished by the drain, not dropped; the process exits 0 only
// after they ended, and their records say so.
func TestAsyncDrainOnSIGTERM(t *testing.T) {
	g := resetGate()
	dir := t.TempDir()
	wf, err := gen.Decode("workflow.toml", []byte(wf("block", `reply = "async"`)))
	if err != nil {
		t.Fatal(err)
	}
	stderr, stdout := &syncBuffer{}, &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- cli.Main([]string{"--bind", "127.0.0.1:0", "--state-dir", dir, "--drain-timeout-secs", "20", "--log-format", "json"},
			cli.Options{Prog: "agent", Workflow: wf, Stdout: stdout, Stderr: stderr})
	}()
	addrRE := regexp.MustCompile(`"msg":"http.listening","workflow":"hooks","addr":"([0-9.:]+)"`)
	waitFor(t, func() bool { return addrRE.MatchString(stderr.String()) })
	ts := &testServer{URL: "http://" + addrRE.FindStringSubmatch(stderr.String())[1], Client: newClient()}
	const n = 3
	var ids []string
	for range n {
		ids = append(ids, accepted(t, ts.do(t, "POST", "/hook", `{}`)))
	}
	waitFor(t, func() bool { return strings.Count(stderr.String(), "workflow.started") == n })
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "http.draining") })
	select {
	case code := <-exit:
		t.Fatalf("exited %d with async runs in flight", code)
	case <-time.After(200 * time.Millisecond):
	}
	close(g)
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("CLI did not exit after the drain")
	}
	store := runtime.NewFileRuns(dir, time.Now)
	for _, id := range ids {
		rec, ok, err := store.GetRun(context.Background(), id)
		if err != nil || !ok || rec.State != runtime.RunEnded || !strings.Contains(string(rec.Outcome), `"released":true`) {
			t.Fatalf("run %s after the drain: %+v %v %v (%s)", id, rec, ok, err, rec.Outcome)
		}
	}
}

// A generated program enables async routes only when its workflow
// declares one (as capabilities/all does for kiln run); these tests serve
// them, so they enable them.
func init() { EnableAsync() }

// TestAsyncRefusedWithoutSupport: an async route in a program that did
// not link async support is refused at start, naming the route, never
// served as a sync route; without async routes GET /v1/runs/{id} is a 404.
func TestAsyncRefusedWithoutSupport(t *testing.T) {
	h := newHost(t, wf("respond", `reply = "async"`), setup{})
	if _, err := New(h, Config{}); err != nil {
		t.Fatalf("positive control: with async support: %v", err)
	}
	enabled := asyncServing
	asyncServing = nil
	defer func() { asyncServing = enabled }()
	_, err := New(h, Config{})
	if err == nil || !strings.Contains(err.Error(), "POST /hook") || !strings.Contains(err.Error(), "built without async route support") {
		t.Fatalf("err = %v, want a refusal naming the route", err)
	}
	ts := start(t, wf("respond", ""), setup{})
	ts.do(t, "POST", "/hook", `{}`).expect(t, 201)
	ts.do(t, "GET", "/v1/runs/"+strings.Repeat("a", 32), "").expect(t, 404)
}
