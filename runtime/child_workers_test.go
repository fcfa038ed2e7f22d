package runtime

import (
	"context"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	// t_compute: a kind that never waits (NodeKind.NoWait); it yields
	// its thread, so a worker started beside its run gets to take a job,
	// and records the run it ran in.
	RegisterNode(NodeKind{Kind: "t_compute", Family: "test", NoWait: true, Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(_ context.Context, c *Call) (Result, error) {
			goruntime.Gosched()
			ranIn.add(c.Run)
			return Next(nil), nil
		}, nil
	}})
	// t_wait: the same, but a kind that may wait.
	RegisterNode(NodeKind{Kind: "t_wait", Family: "test", Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(_ context.Context, c *Call) (Result, error) {
			goruntime.Gosched()
			ranIn.add(c.Run)
			return Next(nil), nil
		}, nil
	}})
}

// ranIn is the set of child runs t_compute and t_wait ran in: a worker
// reuses its child's memory for its next child, so it is the number of
// workers that took jobs.
var ranIn runSet

type runSet struct {
	mu   sync.Mutex
	runs map[*Run]bool
}

func (s *runSet) add(r *Run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[r] = true
}

// workersUsed runs 40 children of one node of kind on 4 workers, the
// engine's clock advancing by tick at each reading, and returns how many
// workers took jobs.
func workersUsed(t *testing.T, kind string, tick time.Duration) int {
	t.Helper()
	child := &workflow.Workflow{Name: "c", Nodes: []workflow.Node{{ID: "n", Type: kind}}}
	p, err := Compile(&workflow.Workflow{Name: "p", Nodes: []workflow.Node{{ID: "fan", Type: "t_fan"}},
		Children: map[string]*workflow.Workflow{"c.toml": child}}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	e := &Engine{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(tick)
		return now
	}}
	ranIn = runSet{runs: map[*Run]bool{}}
	if rep := e.Run(context.Background(), p, RunOptions{}); rep.Outcome.Status != StatusCompleted {
		t.Fatalf("%s: %+v", kind, rep.Outcome)
	}
	return len(ranIn.runs)
}

func init() {
	// t_fan runs 40 children of c.toml on 4 workers.
	RegisterNode(NodeKind{Kind: "t_fan", Family: "test", Prepare: func(_ *workflow.Node, p *Program) (NodeFunc, error) {
		child, _ := p.Child("c.toml")
		return func(ctx context.Context, c *Call) (Result, error) {
			job := func(int) ChildJob { return ChildJob{Program: child} }
			c.Run.RunChildren(ctx, 40, 4, job, func(int, *Outcome) {})
			return Next(nil), nil
		}, nil
	}})
}

// Children that never wait run on the calling goroutine alone while they
// are quick: other workers would cost more than they save. Children that
// may wait get their workers at once, and quick ones that have run for
// helpersAfter get them too.
func TestChildrenThatNeverWaitRunInline(t *testing.T) {
	if n := workersUsed(t, "t_compute", 0); n != 1 {
		t.Errorf("quick children that never wait ran on %d workers, want 1 (the calling goroutine)", n)
	}
	if n := workersUsed(t, "t_wait", 0); n < 2 {
		t.Errorf("children that may wait ran on %d workers, want the 4 workers started at once", n)
	}
	// Children that only compute get no more workers than threads.
	defer goruntime.GOMAXPROCS(goruntime.GOMAXPROCS(2))
	if n := workersUsed(t, "t_compute", helpersAfter); n != 2 {
		t.Errorf("children that never wait but took long ran on %d workers, want 2 (GOMAXPROCS)", n)
	}
}

// A program never waits only when none of its nodes may: a kind that may
// wait, or a retry's backoff, makes its children start on workers at once.
func TestProgramNoWait(t *testing.T) {
	retry := &workflow.Retry{MaxAttempts: 2}
	for _, c := range []struct {
		nodes []workflow.Node
		want  bool
	}{
		{[]workflow.Node{{ID: "a", Type: "t_compute"}, {ID: "b", Type: "t_compute"}}, true},
		{[]workflow.Node{{ID: "a", Type: "t_compute"}, {ID: "b", Type: "t_wait"}}, false},
		{[]workflow.Node{{ID: "a", Type: "t_compute", Retry: retry}}, false},
	} {
		if p := compileT(t, c.nodes, nil); p.noWait != c.want {
			t.Errorf("%v: noWait %v, want %v", c.nodes, p.noWait, c.want)
		}
	}
}
