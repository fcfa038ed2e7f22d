package runtime

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	// t_two runs two children in turn, as map does on one worker: c.toml,
	// then w.toml; it returns the second's status and elapsed time.
	RegisterNode(NodeKind{Kind: "t_two", Family: "test", Prepare: func(_ *workflow.Node, p *Program) (NodeFunc, error) {
		first, _ := p.Child("c.toml")
		second, _ := p.Child("w.toml")
		return func(ctx context.Context, c *Call) (Result, error) {
			var v map[string]any
			job := func(i int) ChildJob { return ChildJob{Program: []*Program{first, second}[i]} }
			c.Run.RunChildren(ctx, 2, 1, job, func(i int, out *Outcome) {
				v = map[string]any{"status": out.Status, "elapsed_ms": out.ElapsedMS}
			})
			return Next(v), nil
		}, nil
	}})
}

// parentOf compiles a one-node parent of kind over children c.toml and
// w.toml of one node each, of kinds childKind and t_waits.
func parentOf(t *testing.T, kind, childKind string) *Program {
	t.Helper()
	one := func(name, kind string) *workflow.Workflow {
		return &workflow.Workflow{Name: name, Nodes: []workflow.Node{{ID: "n", Type: kind}}}
	}
	p, err := Compile(&workflow.Workflow{Name: "p", Nodes: []workflow.Node{{ID: "fan", Type: kind}},
		Children: map[string]*workflow.Workflow{"c.toml": one("c", childKind), "w.toml": one("w", "t_waits")}}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A child run with no deadline and no trace reads no clock at its start
// or end (Run.timed): 40 quick children of RunChildren take a handful of
// readings, those RunChildren makes to decide whether to start helpers,
// not two each.
func TestUntimedChildrenReadNoClock(t *testing.T) {
	p := parentOf(t, "t_fan", "t_compute")
	var readings atomic.Int64
	e := &Engine{Now: func() time.Time { readings.Add(1); return time.Unix(1e9, 0) }}
	ranIn = runSet{runs: map[*Run]bool{}}
	if rep := e.Run(context.Background(), p, RunOptions{}); rep.Outcome.Status != StatusCompleted {
		t.Fatalf("%+v", rep.Outcome)
	}
	// The parent: start, one step, end, report; RunChildren: its first
	// reading, then before jobs 1, 2, 4 and every checkEvery after.
	if n := readings.Load(); n > 20 {
		t.Fatalf("40 untimed children took %d clock readings, want at most 20", n)
	}
}

// A child whose context has a deadline is timed even when its run has
// none (a caller's context, not the workflow's budget): when it times out
// it reports how long it ran, not the time since the zero time, also
// after a sibling that left it no start reading.
func TestChildTimedByItsContext(t *testing.T) {
	p := parentOf(t, "t_two", "merge")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rep := (&Engine{}).Run(ctx, p, RunOptions{})
	out, _ := rep.Trace.Entries[0].Output.(map[string]any)
	ms, _ := strconv.Atoi(fmt.Sprint(out["elapsed_ms"]))
	// Lenient on a loaded machine; the zero time is 9e12 ms away.
	if out["status"] != StatusTimedOut || ms < 1 || ms > 60_000 {
		t.Fatalf("child outcome %v, want timed_out after about 200 ms", out)
	}
}
