package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Test-only node kinds (the real ones live in capability packages, which
// runtime must not import). Their names start with t_ so they can never
// clash with a capability registered in the same test binary.
func init() {
	// t_out: output = the JSON literal in Template (or the value at Expr);
	// branch = the string in Event.
	RegisterNode(NodeKind{Kind: "t_out", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		var lit any
		if n.Template != "" {
			v, err := DecodeJSON([]byte(n.Template))
			if err != nil {
				return nil, fmt.Errorf("bad literal: %v", err)
			}
			lit = v
		}
		expr, branch := n.Expr, n.Event
		return func(_ context.Context, c *Call) (Result, error) {
			v := lit
			if expr != "" {
				v = c.From(expr)
			}
			return NextBranch(v, branch), nil
		}, nil
	}})
	// t_flaky: the first MaxItems attempts fail with the class in Reason.
	RegisterNode(NodeKind{Kind: "t_flaky", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		failures, class := *n.MaxItems, Class(n.Reason)
		return func(_ context.Context, c *Call) (Result, error) {
			if c.Attempt <= failures {
				if class == ClassPolicy {
					return Result{}, &policy.Denial{What: "fs.write", Target: "/nope", Reason: "not in the allowlist"}
				}
				return Result{}, c.Errorf(class, "attempt %d failed", c.Attempt)
			}
			return Next(map[string]any{"attempt": c.Attempt}), nil
		}, nil
	}})
	// t_sleep: waits MaxTokens milliseconds or until ctx ends.
	RegisterNode(NodeKind{Kind: "t_sleep", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		d := time.Duration(*n.MaxTokens) * time.Millisecond
		return func(ctx context.Context, c *Call) (Result, error) {
			select {
			case <-time.After(d):
				return Next("slept"), nil
			case <-ctx.Done():
				return Result{}, fmt.Errorf("sleep interrupted: %w", ctx.Err())
			}
		}, nil
	}})
	RegisterNode(NodeKind{Kind: "t_panic", Family: "test", Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(context.Context, *Call) (Result, error) { panic("boom") }, nil
	}})
	RegisterNode(NodeKind{Kind: "t_action", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		// Event selects the action: terminate, fail, pause, respond.
		what, reason := n.Event, n.Reason
		return func(_ context.Context, c *Call) (Result, error) {
			switch what {
			case "terminate":
				return Result{Action: Terminate}, nil
			case "fail":
				return Result{Action: Fail, Reason: reason}, nil
			case "pause":
				return Result{Action: Pause, Reason: reason}, nil
			case "respond":
				return Result{Value: "r", Respond: &HTTPResponse{Status: 201, ContentType: "text/plain", Body: reason}}, nil
			}
			return Result{}, fmt.Errorf("unknown action %q", what)
		}, nil
	}})
}

func node(id, kind string) workflow.Node { return workflow.Node{ID: id, Type: kind} }

func out(id, literal string) workflow.Node {
	return workflow.Node{ID: id, Type: "t_out", Template: literal}
}

func branchNode(id, branch string) workflow.Node {
	return workflow.Node{ID: id, Type: "t_out", Event: branch, Template: `"` + branch + `"`}
}

func wedge(from, to, when string) workflow.Edge { return workflow.Edge{From: from, To: to, When: when} }

func loopEdge(from, to, when string, n int) workflow.Edge {
	return workflow.Edge{From: from, To: to, When: when, MaxIterations: &n}
}

func compileT(t testing.TB, nodes []workflow.Node, edges []workflow.Edge) *Program {
	t.Helper()
	p, err := Compile(&workflow.Workflow{Name: "t", Nodes: nodes, Edges: edges}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runT(t testing.TB, e *Engine, p *Program, opts RunOptions) *Report {
	t.Helper()
	if e == nil {
		e = &Engine{}
	}
	return e.Run(context.Background(), p, opts)
}

func wantStatus(t *testing.T, r *Report, status, last string) {
	t.Helper()
	for i, e := range r.Trace.Entries {
		if e.ElapsedMS < 0 {
			t.Fatalf("trace entry %d (%s) has no elapsed time", i, e.NodeID)
		}
	}
	if r.Outcome.Status != status || r.Outcome.LastNode != last {
		path := r.Trace.Path()
		if len(path) > 20 {
			path = append(path[:20:20], "...")
		}
		t.Fatalf("outcome = %s at %q (%s), want %s at %q; path %v",
			r.Outcome.Status, r.Outcome.LastNode, r.Outcome.Reason, status, last, path)
	}
}

func wantPath(t *testing.T, r *Report, path ...string) {
	t.Helper()
	if got := strings.Join(r.Trace.Path(), ","); got != strings.Join(path, ",") {
		t.Fatalf("path = %s, want %s", got, strings.Join(path, ","))
	}
}

func TestDeadEndCompletesWithLastOutput(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `{"x":1}`), out("b", `{"y":[1.0,2]}`)},
		[]workflow.Edge{wedge("a", "b", "")})
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "b")
	wantPath(t, r, "a", "b")
	got, _ := EncodeJSON(r.Outcome.FinalValue)
	if string(got) != `{"y":[1.0,2]}` {
		t.Fatalf("final_value = %s", got)
	}
	if n := r.Counters.NodeExecutions.Load(); n != 2 {
		t.Fatalf("node_executions = %d", n)
	}
}

func TestBranchRules(t *testing.T) {
	// b emits "left": the "left" edge fires, the unlabelled one does not.
	p := compileT(t, []workflow.Node{out("a", `1`), branchNode("b", "left"), out("l", `"L"`), out("u", `"U"`)},
		[]workflow.Edge{wedge("a", "b", ""), wedge("b", "l", "left"), wedge("b", "u", "")})
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "l")
	wantPath(t, r, "a", "b", "l")
	if r.Trace.Entries[1].Branch != "left" || r.Trace.Entries[0].Branch != nil {
		t.Fatalf("trace branches = %v, %v", r.Trace.Entries[0].Branch, r.Trace.Entries[1].Branch)
	}

	// No edge matches the branch: dead-end, final value is b's output.
	p = compileT(t, []workflow.Node{branchNode("b", "other"), out("l", `"L"`)},
		[]workflow.Edge{wedge("b", "l", "left")})
	r = runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "b")
	if r.Outcome.FinalValue != "other" {
		t.Fatalf("final = %v", r.Outcome.FinalValue)
	}

	// Two matching edges: a workflow error naming the node and its kind.
	p = compileT(t, []workflow.Node{branchNode("b", "x"), out("l", `1`), out("m", `2`)},
		[]workflow.Edge{wedge("b", "l", "x"), wedge("b", "m", "x")})
	r = runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "b")
	if !strings.Contains(r.Outcome.Reason, "node b (t_out)") || !strings.Contains(r.Outcome.Reason, "2 matching out-edges") {
		t.Fatalf("reason = %q", r.Outcome.Reason)
	}
	if r.Counters.WorkflowErrored.Load() != 1 {
		t.Fatal("workflow_errored not counted")
	}
}

func TestLoopEdgeExhaustion(t *testing.T) {
	// gen -> check; check loops back to gen at most 3 times, then takes the
	// plain edge with the same (empty) label to done.
	p := compileT(t, []workflow.Node{out("gen", `1`), out("check", `2`), out("done", `"ok"`)},
		[]workflow.Edge{wedge("gen", "check", ""), loopEdge("check", "gen", "", 3), wedge("check", "done", "")})
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "done")
	wantPath(t, r, "gen", "check", "gen", "check", "gen", "check", "gen", "check", "done")

	// Without another edge the spent loop dead-ends at check.
	p = compileT(t, []workflow.Node{out("gen", `1`), branchNode("check", "again")},
		[]workflow.Edge{wedge("gen", "check", ""), loopEdge("check", "gen", "again", 2)})
	r = runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "check")
	wantPath(t, r, "gen", "check", "gen", "check", "gen", "check")

	// Loop counters are per run: a second run of the same program loops again.
	r = runT(t, nil, p, RunOptions{})
	wantPath(t, r, "gen", "check", "gen", "check", "gen", "check")
}

func TestStepCap(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `1`), out("b", `2`)},
		[]workflow.Edge{wedge("a", "b", ""), loopEdge("b", "a", "", 1_000_000)})
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "b")
	if !strings.Contains(r.Outcome.Reason, "step cap of 10000") || len(r.Trace.Entries) != MaxSteps {
		t.Fatalf("reason %q after %d steps", r.Outcome.Reason, len(r.Trace.Entries))
	}
}

func TestEntryResolution(t *testing.T) {
	nodes := []workflow.Node{out("a", `"A"`), out("b", `"B"`)}
	p := compileT(t, nodes, nil)
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "")
	if !strings.Contains(r.Outcome.Reason, "ambiguous entry: 2 root nodes (a, b)") {
		t.Fatalf("reason = %q", r.Outcome.Reason)
	}
	wf := &workflow.Workflow{Name: "t", Nodes: nodes,
		StartNodes: []workflow.StartNode{{Name: "main", EntryNode: "b"}, {Name: "other", EntryNode: "a"}}}
	p, err := Compile(wf, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, runT(t, nil, p, RunOptions{}), StatusCompleted, "b")
	wantStatus(t, runT(t, nil, p, RunOptions{Start: "other"}), StatusCompleted, "a")
	r = runT(t, nil, p, RunOptions{Start: "nope"})
	if r.Outcome.Status != StatusErrored || !strings.Contains(r.Outcome.Reason, `unknown start node "nope"`) {
		t.Fatalf("unknown start: %+v", r.Outcome)
	}
}

func TestControlActions(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `1`), {ID: "t", Type: "t_action", Event: "terminate"}}, []workflow.Edge{wedge("a", "t", "")})
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "t")
	if r.Outcome.FinalValue != nil {
		t.Fatal("terminate must complete with null")
	}

	p = compileT(t, []workflow.Node{{ID: "f", Type: "t_action", Event: "fail"}}, nil)
	r = runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusFailed, "f")
	if r.Outcome.Reason != "workflow failed" || r.Counters.WorkflowFailures.Load() != 1 {
		t.Fatalf("fail: %+v", r.Outcome)
	}

	p = compileT(t, []workflow.Node{{ID: "r", Type: "t_action", Event: "respond", Reason: "first"},
		{ID: "r2", Type: "t_action", Event: "respond", Reason: "<ok/>"}}, []workflow.Edge{wedge("r", "r2", "")})
	r = runT(t, nil, p, RunOptions{})
	data, _ := EncodeJSON(r.Outcome)
	if !strings.Contains(string(data), `"http_response":{"status":201,"content_type":"text/plain","body":"<ok/>"}`) {
		t.Fatalf("last respond must win, unescaped: %s", data)
	}
}

func TestPause(t *testing.T) {
	nodes := []workflow.Node{out("a", `{"k":"v"}`), {ID: "p", Type: "t_action", Event: "pause", Reason: "review"}, out("after", `1`)}
	edges := []workflow.Edge{wedge("a", "p", ""), wedge("p", "after", "")}
	p := compileT(t, nodes, edges)
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "p")
	if !strings.Contains(r.Outcome.Reason, "--state-dir") {
		t.Fatalf("reason = %q", r.Outcome.Reason)
	}

	dir := t.TempDir()
	r = runT(t, &Engine{StateDir: dir}, p, RunOptions{ExecutionID: "run-1"})
	wantStatus(t, r, StatusPaused, "p")
	if r.Outcome.RunID != "run-1" || r.Outcome.Reason != "review" {
		t.Fatalf("paused outcome %+v", r.Outcome)
	}
	path, _ := CheckpointPath(dir, "run-1")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.NextNode != "after" || cp.State != "paused" || cp.Outputs["a"] == nil {
		t.Fatalf("checkpoint = %+v", cp)
	}
	// Resuming continues at the successor with the saved outputs.
	r = runT(t, &Engine{StateDir: dir}, p, RunOptions{Resume: &cp})
	wantStatus(t, r, StatusCompleted, "after")
}

func TestPanicIsErrored(t *testing.T) {
	p := compileT(t, []workflow.Node{node("x", "t_panic")}, nil)
	r := runT(t, nil, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "x")
	if !strings.Contains(r.Outcome.Reason, "node x (t_panic): handler panic: boom") {
		t.Fatalf("reason = %q", r.Outcome.Reason)
	}
}

func TestCapabilityNotCompiledIn(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Nodes: []workflow.Node{node("classify", "no_such_kind"), node("c2", "no_such_kind")}}
	_, err := Compile(wf, CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "capability not compiled in") ||
		!strings.Contains(err.Error(), "no_such_kind (node classify, c2)") {
		t.Fatalf("err = %v", err)
	}
	if ClassOf(err) != ClassCapability {
		t.Fatalf("class = %s", ClassOf(err))
	}
	p, err := Compile(wf, CompileOptions{AllowStubs: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Workflow != wf {
		t.Fatal("stub compile lost the workflow")
	}
	p, err = Compile(wf, CompileOptions{Unprovided: map[string]bool{"no_such_kind": true}})
	if err != nil {
		t.Fatal(err)
	}
	r := runT(t, nil, p, RunOptions{Start: "classify"})
	if r.Outcome.Status != StatusErrored || !strings.Contains(r.Outcome.Reason, "capability_not_provided") {
		t.Fatalf("unprovided: %+v", r.Outcome)
	}
}

func TestTriggerKindCannotBeSpoofed(t *testing.T) {
	trig := MakeTrigger("manual", map[string]any{"kind": "http", "user": "ada"})
	if trig["kind"] != "manual" || trig["user"] != "ada" {
		t.Fatalf("trigger = %v", trig)
	}
	trig = MakeTrigger("event", []any{"x"})
	if trig["kind"] != "event" || len(trig["input"].([]any)) != 1 {
		t.Fatalf("non-object payload: %v", trig)
	}
	p := compileT(t, []workflow.Node{{ID: "k", Type: "t_out", Expr: "trigger.kind"}}, nil)
	r := runT(t, nil, p, RunOptions{Trigger: MakeTrigger("manual", map[string]any{"kind": "http"})})
	if r.Outcome.FinalValue != "manual" {
		t.Fatalf("trigger.kind = %v", r.Outcome.FinalValue)
	}
}

func TestResolveDottedPaths(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `{"items":[{"name":"x"},{"name":"y"}],"n":null}`)}, nil)
	run := &Run{Engine: &Engine{}, Program: p, outputs: make([]nodeOutput, 1), trigger: MakeTrigger("manual", map[string]any{"q": "1"})}
	if v, found := run.Resolve("a"); found {
		t.Fatalf("a node that has not run resolved to %v", v)
	}
	run.outputs[0] = nodeOutput{nil, true}
	if v, found := run.Resolve("a"); !found || v != nil {
		t.Fatalf("a node whose output is null resolved to %v, %v", v, found)
	}
	v, _ := DecodeJSON([]byte(`{"items":[{"name":"x"},{"name":"y"}],"n":null}`))
	run.outputs[0] = nodeOutput{v, true}
	cases := []struct {
		path  string
		want  any
		found bool
	}{
		{"a.items.1.name", "y", true},
		{"a.items.2.name", nil, false},
		{"a.items.-1", nil, false},
		{"a.items.01", nil, false},
		{"a.items.x", nil, false},
		{"a.n", nil, true},
		{"a.n.deeper", nil, false},
		{"trigger.q", "1", true},
		{"trigger.kind", "manual", true},
		{"nope.x", nil, false},
		{"", nil, false},
	}
	for _, c := range cases {
		got, found := run.Resolve(c.path)
		if found != c.found || !Equal(got, c.want) {
			t.Errorf("Resolve(%q) = %v, %v; want %v, %v", c.path, got, found, c.want, c.found)
		}
	}
}

func retryNode(id string, failures int, class Class, attempts, backoff int, on string, jitter float64) workflow.Node {
	return workflow.Node{ID: id, Type: "t_flaky", MaxItems: &failures, Reason: string(class),
		Retry: &workflow.Retry{MaxAttempts: attempts, BackoffMS: &backoff, On: on, Jitter: jitter}}
}

type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
	return nil
}

func TestRetryWithBackoff(t *testing.T) {
	var log bytes.Buffer
	rec := &sleepRecorder{}
	e := &Engine{Sleep: rec.sleep, Audit: slog.New(slog.NewJSONHandler(&log, nil))}
	p := compileT(t, []workflow.Node{retryNode("n", 2, ClassTool, 3, 50, "transient", 0)}, nil)
	r := runT(t, e, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "n")
	if got := r.Outcome.FinalValue.(map[string]any)["attempt"]; !Equal(got, json.Number("3")) {
		t.Fatalf("succeeded on attempt %v", got)
	}
	if fmt.Sprint(rec.waits) != "[50ms 100ms]" {
		t.Fatalf("backoff waits = %v, want linear 50ms, 100ms", rec.waits)
	}
	if r.Counters.NodeExecutions.Load() != 3 || r.Counters.NodeFailures.Load() != 2 {
		t.Fatalf("executions %d failures %d", r.Counters.NodeExecutions.Load(), r.Counters.NodeFailures.Load())
	}
	if n := strings.Count(log.String(), `"msg":"node.retry"`); n != 2 {
		t.Fatalf("%d node.retry events in %s", n, log.String())
	}

	// Attempts run out: errored after max_attempts executions.
	rec.waits = nil
	p = compileT(t, []workflow.Node{retryNode("n", 5, ClassMCP, 3, 1, "transient", 0)}, nil)
	r = runT(t, e, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "n")
	if r.Counters.NodeExecutions.Load() != 3 || len(rec.waits) != 2 {
		t.Fatalf("executions %d waits %v", r.Counters.NodeExecutions.Load(), rec.waits)
	}
}

func TestNonRetryableClasses(t *testing.T) {
	for _, class := range []Class{ClassPolicy, ClassSchema, ClassTimeout, ClassConfig, ClassWorkflow, ClassBudget} {
		rec := &sleepRecorder{}
		p := compileT(t, []workflow.Node{retryNode("n", 5, class, 5, 1, "any", 0)}, nil)
		r := runT(t, &Engine{Sleep: rec.sleep}, p, RunOptions{})
		if r.Counters.NodeExecutions.Load() != 1 || len(rec.waits) != 0 {
			t.Errorf("%s was retried: %d executions", class, r.Counters.NodeExecutions.Load())
		}
		want := StatusErrored
		if class == ClassTimeout {
			want = StatusTimedOut
		}
		if r.Outcome.Status != want {
			t.Errorf("%s: status %s, want %s", class, r.Outcome.Status, want)
		}
	}
}

func TestRetryJitterBounds(t *testing.T) {
	rec := &sleepRecorder{}
	p := compileT(t, []workflow.Node{retryNode("n", 40, ClassTool, 41, 100, "any", 0.5)}, nil)
	r := runT(t, &Engine{Sleep: rec.sleep}, p, RunOptions{})
	wantStatus(t, r, StatusCompleted, "n")
	distinct := map[time.Duration]bool{}
	for i, w := range rec.waits {
		base := time.Duration(100*(i+1)) * time.Millisecond
		if w < base/2 || w > base*3/2 {
			t.Fatalf("wait %d = %v outside %v ± 50%%", i+1, w, base)
		}
		distinct[w] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("jitter produced only %d distinct waits", len(distinct))
	}
}

func TestRetryBackoffPastDeadlineTimesOut(t *testing.T) {
	p := compileT(t, []workflow.Node{retryNode("n", 5, ClassTool, 5, 10_000, "any", 0)}, nil)
	r := runT(t, &Engine{}, p, RunOptions{Timeout: time.Second})
	wantStatus(t, r, StatusTimedOut, "n")
	if r.Counters.NodeExecutions.Load() != 1 || r.Counters.WorkflowTimeouts.Load() != 1 {
		t.Fatalf("executions %d", r.Counters.NodeExecutions.Load())
	}
}

func TestDeadline(t *testing.T) {
	// A node that honours ctx is interrupted by the run deadline.
	ms := 5_000
	p := compileT(t, []workflow.Node{out("a", `1`), {ID: "slow", Type: "t_sleep", MaxTokens: &ms}, out("never", `1`)},
		[]workflow.Edge{wedge("a", "slow", ""), wedge("slow", "never", "")})
	start := time.Now()
	r := runT(t, nil, p, RunOptions{Timeout: 50 * time.Millisecond})
	wantStatus(t, r, StatusTimedOut, "slow")
	if time.Since(start) > 2*time.Second || r.Outcome.ElapsedMS < 50 {
		t.Fatalf("elapsed %v, elapsed_ms %d", time.Since(start), r.Outcome.ElapsedMS)
	}
	data, _ := EncodeJSON(r.Outcome)
	if !strings.Contains(string(data), `"status":"timed_out"`) || !strings.Contains(string(data), `"elapsed_ms"`) {
		t.Fatalf("outcome json %s", data)
	}

	// The deadline is checked before every node: with a clock that jumps
	// a second at every reading, the first node starts at the run's start
	// reading and the reading before the second is past the deadline, so
	// the second never starts.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	p = compileT(t, []workflow.Node{out("a", `1`), out("b", `2`), out("c", `3`)},
		[]workflow.Edge{wedge("a", "b", ""), wedge("b", "c", "")})
	r = runT(t, &Engine{Now: clock}, p, RunOptions{Timeout: time.Second})
	wantStatus(t, r, StatusTimedOut, "a")
	wantPath(t, r, "a")

	// [budget].max_run_time_secs applies when no timeout is given.
	wf := &workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "slow", Type: "t_sleep", MaxTokens: &ms}},
		Budget: &workflow.Budget{MaxRunTimeSecs: 1}}
	p, _ = Compile(wf, CompileOptions{})
	start = time.Now()
	r = runT(t, nil, p, RunOptions{})
	if r.Outcome.Status != StatusTimedOut || time.Since(start) > 3*time.Second {
		t.Fatalf("budget deadline: %+v after %v", r.Outcome, time.Since(start))
	}
}

func TestPolicyDenialAbortsCountsAndAudits(t *testing.T) {
	var log bytes.Buffer
	e := &Engine{Audit: slog.New(slog.NewJSONHandler(&log, nil))}
	p := compileT(t, []workflow.Node{out("a", `1`), retryNode("w", 9, ClassPolicy, 3, 1, "any", 0), out("after", `1`)},
		[]workflow.Edge{wedge("a", "w", ""), wedge("w", "after", "")})
	r := runT(t, e, p, RunOptions{})
	wantStatus(t, r, StatusErrored, "w")
	if r.Outcome.Err.Class != ClassPolicy || !strings.Contains(r.Outcome.Reason, "node w (t_flaky): fs.write denied on /nope") {
		t.Fatalf("outcome %+v", r.Outcome)
	}
	if r.Counters.PolicyDenials.Load() != 1 || r.Counters.NodeExecutions.Load() != 2 {
		t.Fatalf("denials %d executions %d", r.Counters.PolicyDenials.Load(), r.Counters.NodeExecutions.Load())
	}
	var ev map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		if m["msg"] == "policy.denied" {
			ev = m
		}
	}
	if ev == nil || ev["node"] != "w" || ev["target"] != "/nope" || ev["execution_id"] != r.ExecutionID {
		t.Fatalf("policy.denied event = %v in\n%s", ev, log.String())
	}
	if !strings.Contains(log.String(), `"msg":"workflow.started"`) || !strings.Contains(log.String(), `"msg":"workflow.errored"`) {
		t.Fatalf("workflow.* events missing:\n%s", log.String())
	}
}

func TestBudgets(t *testing.T) {
	wf := &workflow.Workflow{Name: "t", Nodes: []workflow.Node{out("a", `1`)},
		Budget: &workflow.Budget{MaxLLMTokens: 100, MaxFSWriteMB: 1}}
	p, _ := Compile(wf, CompileOptions{})
	run := &Run{Engine: &Engine{}, Program: p, Counters: &Counters{}, budget: &budget{maxTokens: 100, maxFSWrite: 1 << 20}}
	if err := run.CheckTokens(); err != nil {
		t.Fatal(err)
	}
	if err := run.AddTokens(60); err != nil {
		t.Fatal(err)
	}
	if err := run.AddTokens(60); err == nil || ClassOf(err) != ClassBudget {
		t.Fatalf("token budget: %v", err)
	}
	if err := run.CheckTokens(); err == nil {
		t.Fatal("spent budget must refuse the next call")
	}
	if run.Counters.LLMCalls.Load() != 2 || run.Counters.LLMTokens.Load() != 120 {
		t.Fatal("llm counters")
	}
	if err := run.AddFSWrite(1 << 19); err != nil {
		t.Fatal(err)
	}
	if err := run.AddFSWrite(1<<19 + 1); err == nil || ClassOf(err) != ClassBudget {
		t.Fatalf("fs budget: %v", err)
	}
	if err := run.AddFSWrite(1 << 19); err != nil {
		t.Fatalf("a refused write must not be billed: %v", err)
	}
}

func TestCallDepthCap(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	run := &Run{Engine: &Engine{}, Program: p, Counters: &Counters{}, budget: &budget{}, Depth: MaxCallDepth,
		trigger: MakeTrigger("manual", nil)}
	o, _ := run.RunChild(context.Background(), p, "", nil)
	if o.Status != StatusErrored || !strings.Contains(o.Reason, "call depth exceeds 8") {
		t.Fatalf("outcome %+v", o)
	}
	run.Depth = MaxCallDepth - 1
	o, tr := run.RunChild(context.Background(), p, "", map[string]any{"kind": "spoof"})
	if o.Status != StatusCompleted || len(tr.Entries) != 1 {
		t.Fatalf("child at max depth: %+v", o)
	}
}

func TestOutcomeAndRecordShapes(t *testing.T) {
	cases := []struct {
		o    Outcome
		want string
	}{
		{Outcome{Status: StatusCompleted, FinalValue: json.Number("1.0"), LastNode: "done"},
			`{"status":"completed","final_value":1.0,"last_node":"done"}`},
		{Outcome{Status: StatusFailed, Reason: "bad <input>"}, `{"status":"failed","reason":"bad <input>","last_node":null}`},
		{Outcome{Status: StatusTimedOut, ElapsedMS: 12, LastNode: "x"}, `{"status":"timed_out","elapsed_ms":12,"last_node":"x"}`},
		{Outcome{Status: StatusPaused, RunID: "r1", LastNode: "p", Reason: "ok?"},
			`{"status":"paused","run_id":"r1","last_node":"p","reason":"ok?"}`},
	}
	for _, c := range cases {
		got, err := EncodeJSON(&c.o)
		if err != nil || string(got) != c.want {
			t.Errorf("got %s (%v), want %s", got, err, c.want)
		}
	}

	p := compileT(t, []workflow.Node{out("a", `{"v":1.0}`)}, nil)
	r := runT(t, nil, p, RunOptions{ExecutionID: "e1"})
	data, err := r.Record()
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"workflow", "start_node", "execution_id", "status", "last_node", "detail", "wall_ms", "cost", "trace"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %s", k)
		}
	}
	cost := rec["cost"].(map[string]any)
	for _, k := range []string{"workflow_starts", "workflow_completions", "workflow_failures", "workflow_timeouts",
		"workflow_errored", "node_executions", "node_failures", "policy_denials", "llm_calls", "llm_tokens"} {
		if _, ok := cost[k]; !ok {
			t.Errorf("cost lacks %s", k)
		}
	}
	if cost["node_executions"].(float64) != 1 || rec["execution_id"] != "e1" {
		t.Fatalf("record %s", data)
	}
	entries := rec["trace"].(map[string]any)["entries"].([]any)
	entry := entries[0].(map[string]any)
	for _, k := range []string{"node_id", "kind", "outcome", "branch", "output", "elapsed_ms"} {
		if _, ok := entry[k]; !ok {
			t.Errorf("trace entry lacks %s", k)
		}
	}
	if !strings.Contains(string(data), `"v": 1.0`) {
		t.Fatalf("record must keep 1.0: %s", data)
	}
}
