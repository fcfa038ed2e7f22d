package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Test node kinds: small handlers whose behaviour the child workflows
// below combine. They exercise the real engine; only the leaves are fake.
var (
	inFlight    atomic.Int64
	maxInFlight atomic.Int64
)

func init() {
	reg := func(kind string, f runtime.NodeFunc) {
		runtime.RegisterNode(runtime.NodeKind{Kind: kind, Family: "composetest",
			Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) { return f, nil }})
	}
	// ctest_echo returns the trigger input (or the whole trigger) and
	// records concurrency; trigger.sleep_ms makes it slow.
	reg("ctest_echo", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		trig := c.Run.Trigger()
		if ms, ok := trig["sleep_ms"].(json.Number); ok {
			d, _ := ms.Int64()
			select {
			case <-time.After(time.Duration(d) * time.Millisecond):
			case <-ctx.Done():
				return runtime.Result{}, runtime.Errorf(runtime.ClassTimeout, "deadline")
			}
		}
		if in, ok := trig["input"]; ok {
			return runtime.Next(in), nil
		}
		return runtime.Next(trig), nil
	})
	reg("ctest_fail", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Fail, Reason: "child said no"}, nil
	})
	reg("ctest_pause", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Pause, Reason: "approve me"}, nil
	})
	reg("ctest_deny", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		_, err := c.Run.Policy().FSWrite("/etc/kiln-compose-test")
		return runtime.Result{}, err
	})
	// ctest_failif fails when the trigger input is the string "bad".
	reg("ctest_failif", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		if c.Run.Trigger()["input"] == "bad" {
			return runtime.Result{Action: runtime.Fail, Reason: "bad item"}, nil
		}
		return runtime.Next(c.Run.Trigger()["input"]), nil
	})
	// ctest_write accounts 400 KiB against the fs-write budget.
	reg("ctest_write", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Next(nil), c.Run.AddFSWrite(400 << 10)
	})
	reg("ctest_mark", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Next("error edge taken"), nil
	})
}

func decode(t testing.TB, src string) *workflow.Workflow {
	t.Helper()
	var wf workflow.Workflow
	md, err := toml.Decode(src, &wf)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded keys %v", und)
	}
	wf.Digest = fmt.Sprintf("digest-%s", wf.Name)
	return &wf
}

// build compiles parent with children keyed by their declared paths.
func build(t testing.TB, parent string, children map[string]string) *runtime.Program {
	t.Helper()
	wf := decode(t, parent)
	wf.Children = map[string]*workflow.Workflow{}
	for path, src := range children {
		wf.Children[path] = decode(t, src)
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, p *runtime.Program, payload any, timeout time.Duration) *runtime.Report {
	t.Helper()
	e := &runtime.Engine{}
	return e.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", payload), Timeout: timeout})
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := runtime.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const echoChild = `
name = "echo"
[[nodes]]
id = "echo"
type = "ctest_echo"
`

func TestCallReturnsChildResult(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "c"
type = "call"
workflow = "echo.toml"
input_from = "trigger.data"
`, map[string]string{"echo.toml": echoChild})
	rep := run(t, p, map[string]any{"data": map[string]any{"x": json.Number("1.0")}}, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("status %s: %s", rep.Outcome.Status, rep.Outcome.Reason)
	}
	// The child sees its input hoisted into its trigger, kind inherited.
	got := js(t, rep.Outcome.FinalValue)
	if got != `{"result":{"kind":"manual","x":1.0}}` {
		t.Fatalf("final value %s", got)
	}
	// Counters are shared with the child: 2 starts, 2 node executions.
	if s := rep.Counters.Snapshot(); s["workflow_starts"] != 2 || s["node_executions"] != 2 {
		t.Fatalf("counters %v", s)
	}
}

func TestCallDefaultsToParentTrigger(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "c"
type = "call"
workflow = "echo.toml"
`, map[string]string{"echo.toml": echoChild})
	rep := run(t, p, map[string]any{"a": "b", "kind": "spoofed"}, 0)
	if got := js(t, rep.Outcome.FinalValue); got != `{"result":{"a":"b","kind":"manual"}}` {
		t.Fatalf("final value %s", got)
	}
}

func TestCallChildFailureRoutesErrorBranch(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "c"
type = "call"
workflow = "fail.toml"
[[nodes]]
id = "handled"
type = "ctest_mark"
[[edges]]
from = "c"
to = "handled"
when = "error"
`, map[string]string{"fail.toml": "name = \"f\"\n[[nodes]]\nid = \"f\"\ntype = \"ctest_fail\"\n"})
	rep := run(t, p, nil, 0)
	if rep.Outcome.Status != runtime.StatusCompleted || rep.Outcome.FinalValue != "error edge taken" {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	e := rep.Trace.Entries[0]
	if e.Branch != "error" || js(t, e.Output) != `{"error":"child said no"}` {
		t.Fatalf("call trace entry %+v", e)
	}
}

func TestCallChildEngineErrorAbortsParent(t *testing.T) {
	parent := `
name = "parent"
[policy.fs]
write = ["/tmp/**"]
[[nodes]]
id = "c"
type = "call"
workflow = "deny.toml"
`
	child := "name = \"d\"\n[policy.fs]\nwrite = [\"/tmp/**\"]\n[[nodes]]\nid = \"w\"\ntype = \"ctest_deny\"\n"
	p := build(t, parent, map[string]string{"deny.toml": child})
	rep := run(t, p, nil, 0)
	o := rep.Outcome
	if o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "denied") || !strings.Contains(o.Reason, "node c (call)") {
		t.Fatalf("outcome %+v", o)
	}
	// Counted once, by the child, not again by the parent.
	if n := rep.Counters.Snapshot()["policy_denials"]; n != 1 {
		t.Fatalf("policy_denials = %d", n)
	}
}

func TestCallNestedPauseRejected(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "c"
type = "call"
workflow = "pause.toml"
`, map[string]string{"pause.toml": "name = \"p\"\n[[nodes]]\nid = \"p\"\ntype = \"ctest_pause\"\n"})
	rep := run(t, p, nil, 0)
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "child workflow") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}

func TestLoadTimeErrors(t *testing.T) {
	cases := map[string]string{
		"missing child": `
name = "p"
[[nodes]]
id = "c"
type = "call"
workflow = "nowhere.toml"
`,
		"map without max_items": `
name = "p"
[[nodes]]
id = "m"
type = "map"
items_from = "trigger.items"
workflow = "echo.toml"
`,
		"map max_concurrent 0": `
name = "p"
[[nodes]]
id = "m"
type = "map"
items_from = "trigger.items"
workflow = "echo.toml"
max_items = 3
max_concurrent = 0
`,
		"unknown child start": `
name = "p"
[[nodes]]
id = "c"
type = "call"
workflow = "echo.toml"
start = "nope"
`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			wf := decode(t, src)
			wf.Children = map[string]*workflow.Workflow{"echo.toml": decode(t, echoChild)}
			_, err := runtime.Compile(wf, runtime.CompileOptions{})
			if err == nil {
				t.Fatal("compiled")
			}
			if !strings.Contains(err.Error(), "node ") {
				t.Fatalf("error does not name the node: %v", err)
			}
		})
	}
}

// chain builds a workflow calling itself through n distinct levels.
func chain(t *testing.T, levels int) (*workflow.Workflow, error) {
	leaf := decode(t, echoChild)
	cur := leaf
	for i := levels; i >= 1; i-- {
		wf := decode(t, fmt.Sprintf("name = \"l%d\"\n[[nodes]]\nid = \"c\"\ntype = \"call\"\nworkflow = \"next.toml\"\n", i))
		wf.Children = map[string]*workflow.Workflow{"next.toml": cur}
		cur = wf
	}
	_, err := runtime.Compile(cur, runtime.CompileOptions{})
	return cur, err
}

func TestDepthBound(t *testing.T) {
	// 8 nested calls: the leaf runs at depth 8, the bound.
	wf, err := chain(t, runtime.MaxCallDepth)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := runtime.Compile(wf, runtime.CompileOptions{})
	rep := run(t, p, "deep", 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if got := js(t, rep.Outcome.FinalValue); !strings.Contains(got, `"deep"`) || strings.Count(got, "result") != 8 {
		t.Fatalf("final %s", got)
	}
	// One more level is refused when compiling, before anything runs.
	if _, err := chain(t, runtime.MaxCallDepth+1); err == nil || !strings.Contains(err.Error(), "deeper than 8") {
		t.Fatalf("9 levels: %v", err)
	}
}

func TestParallelDeclaredOrderAndConcurrency(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "split"
type = "parallel"
branches = [
  { workflow = "echo.toml", input_from = "trigger.a" },
  { workflow = "echo.toml", input_from = "trigger.b" },
  { workflow = "echo.toml", input_from = "trigger.c" },
]
`, map[string]string{"echo.toml": echoChild})
	payload := map[string]any{
		"a": map[string]any{"n": "a", "sleep_ms": json.Number("400")},
		"b": map[string]any{"n": "b", "sleep_ms": json.Number("300")},
		"c": map[string]any{"n": "c", "sleep_ms": json.Number("200")},
	}
	maxInFlight.Store(0)
	rep := run(t, p, payload, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	res := rep.Outcome.FinalValue.(map[string]any)
	if res["ok"] != true {
		t.Fatalf("ok = %v", res["ok"])
	}
	for i, want := range []string{"a", "b", "c"} {
		r := res["results"].([]any)[i].(map[string]any)["result"].(map[string]any)
		if r["n"] != want {
			t.Fatalf("results[%d] = %v", i, r)
		}
	}
	if m := maxInFlight.Load(); m != 3 {
		t.Fatalf("branches did not run concurrently: at most %d at once", m)
	}
}

func TestParallelAnyFailureSetsErrorBranch(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "split"
type = "parallel"
branches = [{ workflow = "echo.toml" }, { workflow = "fail.toml" }]
`, map[string]string{"echo.toml": echoChild, "fail.toml": "name = \"f\"\n[[nodes]]\nid = \"f\"\ntype = \"ctest_fail\"\n"})
	rep := run(t, p, "x", 0)
	e := rep.Trace.Entries[0]
	if e.Branch != "error" {
		t.Fatalf("branch %v", e.Branch)
	}
	if got := js(t, e.Output); got != `{"ok":false,"results":[{"result":"x"},{"error":"child said no"}]}` {
		t.Fatalf("output %s", got)
	}
	// No error edge: the parent dead-ends carrying the output.
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("status %s", rep.Outcome.Status)
	}
}

const mapParent = `
name = "parent"
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "item.toml"
max_items = 3
max_concurrent = 2
`

var itemChild = map[string]string{"item.toml": "name = \"i\"\n[[nodes]]\nid = \"i\"\ntype = \"ctest_failif\"\n"}

func mapItems(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("item-%d", i)
	}
	return out
}

func TestMapBounds(t *testing.T) {
	p := build(t, mapParent, itemChild)
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, `{"ok":true,"results":[]}`},
		{1, `{"ok":true,"results":[{"result":"item-0"}]}`},
		{3, `{"ok":true,"results":[{"result":"item-0"},{"result":"item-1"},{"result":"item-2"}]}`},
	} {
		rep := run(t, p, map[string]any{"items": mapItems(tc.n)}, 0)
		if rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("%d items: %+v", tc.n, rep.Outcome)
		}
		if got := js(t, rep.Outcome.FinalValue); got != tc.want {
			t.Fatalf("%d items: %s", tc.n, got)
		}
	}
	// max+1 is a hard error, never a truncation; no child ran.
	rep := run(t, p, map[string]any{"items": mapItems(4)}, 0)
	o := rep.Outcome
	if o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "4 items exceed max_items = 3") ||
		!strings.Contains(o.Reason, "node each (map)") {
		t.Fatalf("outcome %+v", o)
	}
	if s := rep.Counters.Snapshot(); s["workflow_starts"] != 1 {
		t.Fatalf("children ran: %v", s)
	}
}

func TestMapNonArrayIsHardError(t *testing.T) {
	p := build(t, mapParent, itemChild)
	for _, payload := range []any{map[string]any{"items": "a,b"}, map[string]any{}} {
		rep := run(t, p, payload, 0)
		if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "must resolve to a JSON array") {
			t.Fatalf("outcome %+v", rep.Outcome)
		}
	}
}

func TestMapFailureAndOrder(t *testing.T) {
	p := build(t, mapParent, itemChild)
	rep := run(t, p, map[string]any{"items": []any{"ok-1", "bad", "ok-2"}}, 0)
	e := rep.Trace.Entries[0]
	if e.Branch != "error" || js(t, e.Output) != `{"ok":false,"results":[{"result":"ok-1"},{"error":"bad item"},{"result":"ok-2"}]}` {
		t.Fatalf("entry %+v", e)
	}
}

func TestMapWavesBoundConcurrency(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "echo.toml"
max_items = 10
max_concurrent = 2
`, map[string]string{"echo.toml": echoChild})
	items := make([]any, 5)
	for i := range items {
		// Later items finish first inside a wave; order must still hold.
		items[i] = map[string]any{"i": json.Number(fmt.Sprint(i)), "sleep_ms": json.Number(fmt.Sprint(150 - 20*i))}
	}
	maxInFlight.Store(0)
	rep := run(t, p, map[string]any{"items": items}, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if m := maxInFlight.Load(); m != 2 {
		t.Fatalf("max concurrent children = %d, want 2", m)
	}
	for i, r := range rep.Outcome.FinalValue.(map[string]any)["results"].([]any) {
		if got := r.(map[string]any)["result"].(map[string]any)["i"]; got != json.Number(fmt.Sprint(i)) {
			t.Fatalf("results[%d].i = %v", i, got)
		}
	}
}

func TestMapSharesParentDeadline(t *testing.T) {
	p := build(t, `
name = "parent"
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "echo.toml"
max_items = 10
max_concurrent = 1
`, map[string]string{"echo.toml": echoChild})
	items := []any{}
	for range 4 {
		items = append(items, map[string]any{"sleep_ms": json.Number("1000")})
	}
	start := time.Now()
	rep := run(t, p, map[string]any{"items": items}, 150*time.Millisecond)
	if rep.Outcome.Status != runtime.StatusTimedOut {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	// Run one after the other without the shared deadline, they would take 4 s.
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("children outlived the parent deadline: %v", took)
	}
}

func TestChildrenShareEnginePolicy(t *testing.T) {
	// A fixture-style engine policy override reaches the children too.
	p := build(t, `
name = "parent"
[[nodes]]
id = "c"
type = "call"
workflow = "deny.toml"
`, map[string]string{"deny.toml": "name = \"d\"\n[[nodes]]\nid = \"w\"\ntype = \"ctest_deny\"\n"})
	// Without [policy] the child's write check passes...
	if rep := run(t, p, nil, 0); rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("allow-all: %+v", rep.Outcome)
	}
	// ...and with an engine-level policy it is denied.
	e := &runtime.Engine{Policy: policy.New(&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/tmp/**"}}})}
	rep := e.Run(context.Background(), p, runtime.RunOptions{})
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "denied") {
		t.Fatalf("override: %+v", rep.Outcome)
	}
}

func TestMapCannotOutspendTheRunBudget(t *testing.T) {
	p := build(t, `
name = "parent"
[budget]
max_fs_write_mb = 1
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "write.toml"
max_items = 5
max_concurrent = 1
`, map[string]string{"write.toml": "name = \"w\"\n[[nodes]]\nid = \"w\"\ntype = \"ctest_write\"\n"})
	// Two writes of 400 KiB fit in 1 MiB; the third does not.
	rep := run(t, p, map[string]any{"items": []any{1, 2}}, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("two writes: %+v", rep.Outcome)
	}
	rep = run(t, p, map[string]any{"items": []any{1, 2, 3}}, 0)
	if o := rep.Outcome; o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "max_fs_write_mb") || o.Err.Class != runtime.ClassBudget {
		t.Fatalf("three writes: %+v", o)
	}
}

// BenchmarkMapFanOut measures the cost of one child run: a map over 100
// items with waves of 8, each child a single node.
func BenchmarkMapFanOut(b *testing.B) {
	p := build(b, `
name = "parent"
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "item.toml"
max_items = 100
max_concurrent = 8
`, itemChild)
	payload := map[string]any{"items": mapItems(100)}
	e := &runtime.Engine{}
	b.ResetTimer()
	for b.Loop() {
		rep := e.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", payload)})
		if rep.Outcome.Status != runtime.StatusCompleted {
			b.Fatal(rep.Outcome.Reason)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/child")
}
