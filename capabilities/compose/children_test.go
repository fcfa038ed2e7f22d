package compose

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Test kinds for the child-run invariants: what a child sees of its own run.
var (
	seenIDsMu sync.Mutex
	seenIDs   []string
	seenKeys  []string // the idempotency key each child's node presented
)

func init() {
	reg := func(kind string, f runtime.NodeFunc) {
		runtime.RegisterNode(runtime.NodeKind{Kind: kind, Family: "composetest",
			Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) { return f, nil }})
	}
	// ctest_id records the child's run id and its idempotency key, and
	// returns the id.
	reg("ctest_id", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		key := c.IdempotencyKey() // first: it must not need ID() called before it
		seenIDsMu.Lock()
		seenIDs = append(seenIDs, c.Run.ID())
		seenKeys = append(seenKeys, key)
		seenIDsMu.Unlock()
		return runtime.Next(c.Run.ID()), nil
	})
	// ctest_probe returns what its run knows before its second node ran:
	// the second node's output (none, in a fresh run) and its trigger.
	reg("ctest_probe", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		_, later := c.Run.Resolve("later")
		return runtime.Next(map[string]any{"later_set": later, "input": c.Run.Trigger()["input"],
			"outputs": json.Number(fmt.Sprint(len(c.Run.Outputs())))}), nil
	})
	// ctest_last returns the probe's output.
	reg("ctest_last", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Next(c.From("probe")), nil
	})
	// ctest_int returns Go values the engine must normalise.
	reg("ctest_int", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Next(map[string]any{"n": 7, "f": 1.5, "list": []string{"a"}}), nil
	})
}

const mapOf = `
name = "parent"
[[nodes]]
id = "first"
type = "map"
items_from = "trigger.items"
workflow = "child.toml"
max_items = 1000
max_concurrent = %d
[[nodes]]
id = "second"
type = "map"
items_from = "trigger.items"
workflow = "child.toml"
max_items = 1000
max_concurrent = %d
[[edges]]
from = "first"
to = "second"
`

// Child run ids are derived from the parent's and unique among all its
// children, concurrent ones and those of another node included: the
// idempotency key of a side effect is derived from the run id, so two
// children sharing one would let a receiver drop one child's effect as a
// repeat of the other's.
func TestChildRunIDsUnique(t *testing.T) {
	p := build(t, fmt.Sprintf(mapOf, 4, 3), map[string]string{"child.toml": "name = \"c\"\n[[nodes]]\nid = \"id\"\ntype = \"ctest_id\"\n"})
	seenIDs, seenKeys = nil, nil
	e := &runtime.Engine{}
	rep := e.Run(context.Background(), p, runtime.RunOptions{ExecutionID: "parent-run",
		Trigger: runtime.MakeTrigger("manual", map[string]any{"items": mapItems(300)})})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if len(seenIDs) != 600 {
		t.Fatalf("%d children ran, want 600", len(seenIDs))
	}
	seen := map[string]bool{}
	for _, id := range seenIDs {
		if !strings.HasPrefix(id, "parent-run.") || id == "parent-run." {
			t.Fatalf("child id %q is not derived from the parent's", id)
		}
		if seen[id] {
			t.Fatalf("child id %q used twice", id)
		}
		seen[id] = true
	}
	// The idempotency key a child's node presents is derived from that
	// child's own id, so no two children share one.
	for i, id := range seenIDs {
		sum := sha256.Sum256([]byte(id + ".id"))
		if seenKeys[i] != hex.EncodeToString(sum[:]) {
			t.Fatalf("child %s presented idempotency key %s, not the one of its own id", id, seenKeys[i])
		}
	}
	// Each child reports the id it ran under, in item order.
	res := rep.Outcome.FinalValue.(map[string]any)["results"].([]any)
	for _, r := range res {
		if id, _ := r.(map[string]any)["result"].(string); !seen[id] {
			t.Fatalf("result %v is no child's id", r)
		}
	}
}

// A map worker reuses one child run's memory for the next child: nothing of
// the previous child (outputs, trigger) is visible to the next one. Each
// child's probe runs before its second node; had the memory of the
// previous child been kept, the probe would see that node's output.
func TestMapChildrenShareNoState(t *testing.T) {
	child := `
name = "c"
[[nodes]]
id = "probe"
type = "ctest_probe"
[[nodes]]
id = "later"
type = "ctest_last"
[[edges]]
from = "probe"
to = "later"
`
	for _, workers := range []int{1, 3} {
		p := build(t, fmt.Sprintf(mapOf, workers, workers), map[string]string{"child.toml": child})
		items := mapItems(50)
		rep := run(t, p, map[string]any{"items": items}, 0)
		if rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("outcome %+v", rep.Outcome)
		}
		for i, r := range rep.Outcome.FinalValue.(map[string]any)["results"].([]any) {
			got := r.(map[string]any)["result"].(map[string]any)
			if got["later_set"] != false || got["input"] != items[i] || got["outputs"] != json.Number("0") {
				t.Fatalf("workers %d: results[%d] = %v: the child saw another child's state", workers, i, got)
			}
		}
	}
}

// A child engine error (here a policy denial) stops children not yet
// started: with one worker no child after the first runs; with three, at
// most the children already running beside it finish.
func TestMapEngineErrorStopsLaterChildren(t *testing.T) {
	deny := "name = \"d\"\n[[nodes]]\nid = \"w\"\ntype = \"ctest_deny\"\n"
	for _, tc := range []struct{ workers, maxStarts int }{{1, 1 + 1}, {3, 1 + 3}} {
		p := build(t, fmt.Sprintf(mapOf, tc.workers, tc.workers), map[string]string{"child.toml": deny})
		e := &runtime.Engine{Policy: policy.New(&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/tmp/**"}}})}
		rep := e.Run(context.Background(), p, runtime.RunOptions{
			Trigger: runtime.MakeTrigger("manual", map[string]any{"items": mapItems(30)})})
		if o := rep.Outcome; o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "child workflow child.toml") {
			t.Fatalf("outcome %+v", o)
		}
		if s := rep.Counters.Snapshot()["workflow_starts"]; s > int64(tc.maxStarts) {
			t.Fatalf("workers %d: %d runs started after the error, want at most %d", tc.workers, s, tc.maxStarts)
		}
	}
}

// Values that enter through the trigger or come out of a handler as Go
// values reach map's results as JSON value trees.
func TestChildOutputsAreValueTrees(t *testing.T) {
	p := build(t, fmt.Sprintf(mapOf, 2, 2), map[string]string{"child.toml": "name = \"c\"\n[[nodes]]\nid = \"n\"\ntype = \"ctest_int\"\n"})
	rep := run(t, p, map[string]any{"items": []any{1, 2}}, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	want := `{"ok":true,"results":[{"result":{"f":1.5,"list":["a"],"n":7}},{"result":{"f":1.5,"list":["a"],"n":7}}]}`
	if got := js(t, rep.Outcome.FinalValue); got != want {
		t.Fatalf("final value %s", got)
	}
	r := rep.Outcome.FinalValue.(map[string]any)["results"].([]any)[0].(map[string]any)["result"].(map[string]any)
	if _, ok := r["n"].(json.Number); !ok {
		t.Fatalf("n is %T, want json.Number", r["n"])
	}
	if _, ok := r["list"].([]any); !ok {
		t.Fatalf("list is %T, want []any", r["list"])
	}
	// The trigger's Go ints became numbers before any node saw them.
	p = build(t, fmt.Sprintf(mapOf, 1, 1), map[string]string{"child.toml": echoChild})
	rep = run(t, p, map[string]any{"items": []any{int64(5), []string{"x"}}}, 0)
	got := rep.Outcome.FinalValue.(map[string]any)["results"].([]any)
	if n, ok := got[0].(map[string]any)["result"].(json.Number); !ok || n != "5" {
		t.Fatalf("results[0] = %#v", got[0])
	}
	if l, ok := got[1].(map[string]any)["result"].([]any); !ok || l[0] != "x" {
		t.Fatalf("results[1] = %#v", got[1])
	}
}

// call reuses its run's spare child memory for the next call: a chain of
// calls to the probe shows each child a fresh run.
func TestCallChildrenShareNoState(t *testing.T) {
	probe := `
name = "c"
[[nodes]]
id = "probe"
type = "ctest_probe"
[[nodes]]
id = "later"
type = "ctest_last"
[[edges]]
from = "probe"
to = "later"
`
	p := build(t, `
name = "parent"
[[nodes]]
id = "c1"
type = "call"
workflow = "probe.toml"
input_from = "trigger.a"
[[nodes]]
id = "c2"
type = "call"
workflow = "probe.toml"
input_from = "trigger.b"
[[edges]]
from = "c1"
to = "c2"
`, map[string]string{"probe.toml": probe})
	rep := run(t, p, map[string]any{"a": "first", "b": "second"}, 0)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	for i, want := range []string{"first", "second"} {
		got := rep.Trace.Entries[i].Output.(map[string]any)["result"].(map[string]any)
		if got["later_set"] != false || got["input"] != want || got["outputs"] != json.Number("0") {
			t.Fatalf("call %d: %v: the child saw another child's state", i+1, got)
		}
	}
}

// Map workers count their children in counters of their own and add them
// to the run's when they are done: the report counts every child, with
// one worker or several, and after a parallel nested in each child.
func TestChildCountersAddUp(t *testing.T) {
	child := `
name = "c"
[[nodes]]
id = "probe"
type = "ctest_probe"
[[nodes]]
id = "later"
type = "ctest_last"
[[edges]]
from = "probe"
to = "later"
`
	nested := `
name = "n"
[[nodes]]
id = "fan"
type = "parallel"
branches = [{ workflow = "leaf.toml" }, { workflow = "leaf.toml" }, { workflow = "leaf.toml" }]
`
	leaf := "name = \"l\"\n[[nodes]]\nid = \"x\"\ntype = \"ctest_probe\"\n"
	const items = 40
	for _, tc := range []struct {
		name     string
		children map[string]string
		// per item: child runs started and nodes executed
		runs, nodes int64
	}{
		{"two-node child", map[string]string{"child.toml": child}, 1, 2},
		{"child running a parallel", map[string]string{"child.toml": nested, "leaf.toml": leaf}, 1 + 3, 1 + 3},
	} {
		for _, workers := range []int{1, 4} {
			src := fmt.Sprintf(mapOf, workers, workers)
			wf := decode(t, src)
			wf.Children = map[string]*workflow.Workflow{}
			for path, s := range tc.children {
				wf.Children[path] = decode(t, s)
			}
			// leaf.toml is the nested child's child.
			if l, ok := wf.Children["leaf.toml"]; ok {
				wf.Children["child.toml"].Children = map[string]*workflow.Workflow{"leaf.toml": l}
			}
			p, err := runtime.Compile(wf, runtime.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rep := run(t, p, map[string]any{"items": mapItems(items)}, 0)
			if rep.Outcome.Status != runtime.StatusCompleted {
				t.Fatalf("%s, workers %d: outcome %+v", tc.name, workers, rep.Outcome)
			}
			s := rep.Counters.Snapshot()
			// Two map nodes over the items, in one top-level run.
			wantRuns, wantNodes := 1+2*items*tc.runs, 2+2*items*tc.nodes
			if s["workflow_starts"] != wantRuns || s["workflow_completions"] != wantRuns || s["node_executions"] != wantNodes {
				t.Errorf("%s, workers %d: counters %v, want %d starts and completions, %d node executions",
					tc.name, workers, s, wantRuns, wantNodes)
			}
		}
	}
}
