package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Durable-run test kinds:
//   - d_step records its id in dSteps and outputs {"step": id}; with
//     Reason "fail-once" it errors the first time it runs.
//   - d_pause pauses for approval.
//   - d_peek outputs the state of its own run's checkpoint file.
//   - d_wait closes *dWaitEntered, then waits for its run's context to end.
var (
	dWaitEntered atomic.Pointer[chan struct{}]
	dMu          sync.Mutex
	dSteps       []string
	dFailed      = map[string]bool{}
)

func init() {
	RegisterNode(NodeKind{Kind: "d_step", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			dMu.Lock()
			defer dMu.Unlock()
			if c.Node.Reason == "fail-once" && !dFailed[c.Run.ID()] {
				dFailed[c.Run.ID()] = true
				return Result{}, c.Errorf(ClassTool, "transient trouble")
			}
			dSteps = append(dSteps, c.Node.ID)
			return Next(map[string]any{"step": c.Node.ID, "secret": c.Run.Trigger()["secret"]}), nil
		}, nil
	}})
	RegisterNode(NodeKind{Kind: "d_pause", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			return Result{Action: Pause, Reason: "approve " + c.Node.ID}, nil
		}, nil
	}})
	RegisterNode(NodeKind{Kind: "d_wait", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			close(*dWaitEntered.Load())
			<-ctx.Done()
			return Result{}, ctx.Err()
		}, nil
	}})
	// d_kind returns the trigger kind its run hands its children.
	RegisterNode(NodeKind{Kind: "d_kind", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			return Next(c.Run.kind()), nil
		}, nil
	}})
	RegisterNode(NodeKind{Kind: "d_peek", Family: "test", Prepare: func(n *workflow.Node, _ *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			cp, err := LoadCheckpoint(c.Run.Engine.StateDir, c.Run.ID())
			if err != nil {
				return Result{}, err
			}
			return Next(map[string]any{"state": cp.State, "next": cp.NextNode,
				"active": runActive(c.Run.Engine.StateDir, c.Run.ID())}), nil
		}, nil
	}})
}

func dReset() {
	dMu.Lock()
	defer dMu.Unlock()
	dSteps = nil
	dFailed = map[string]bool{}
}

func dSteped() []string {
	dMu.Lock()
	defer dMu.Unlock()
	return append([]string(nil), dSteps...)
}

func dNode(id, kind string) workflow.Node { return workflow.Node{ID: id, Type: kind} }

func dProgram(t *testing.T, digest string, nodes []workflow.Node, edges []workflow.Edge) *Program {
	t.Helper()
	p, err := Compile(&workflow.Workflow{Name: "durable", Digest: digest, Nodes: nodes, Edges: edges}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func chainEdges(ids ...string) []workflow.Edge {
	var out []workflow.Edge
	for i := 1; i < len(ids); i++ {
		out = append(out, workflow.Edge{From: ids[i-1], To: ids[i]})
	}
	return out
}

func exists(t *testing.T, path string) bool {
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func TestCheckpointEachNodeLifecycle(t *testing.T) {
	dReset()
	dir := t.TempDir()
	p := dProgram(t, "d1", []workflow.Node{dNode("a", "d_step"), dNode("peek", "d_peek"), dNode("b", "d_step")},
		chainEdges("a", "peek", "b"))
	rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: "run-each", CheckpointEachNode: true})
	if rep.Outcome.Status != StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	// While running, the checkpoint was incomplete, pointed at the node
	// being executed, and the run held its lock.
	peek, _ := EncodeJSON(rep.Trace.Entries[1].Output)
	if string(peek) != `{"active":true,"next":"peek","state":"incomplete"}` {
		t.Fatalf("checkpoint during the run: %s", peek)
	}
	cpPath, _ := CheckpointPath(dir, "run-each")
	lp, _ := lockPath(dir, "run-each")
	if exists(t, cpPath) || exists(t, lp) {
		t.Fatal("a completed run left its checkpoint or lock behind")
	}
}

func TestRunLockExcludesOtherHolders(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockRun(dir, "held")
	if err != nil {
		t.Fatal(err)
	}
	if !runActive(dir, "held") {
		t.Fatal("held lock not seen as active")
	}
	if _, err := lockRun(dir, "held"); err == nil || !strings.Contains(err.Error(), "executing in another process") {
		t.Fatalf("second lock: %v", err)
	}
	// A resume while the run is held is refused and changes nothing.
	p := dProgram(t, "d2", []workflow.Node{dNode("a", "d_step"), dNode("b", "d_step")}, chainEdges("a", "b"))
	path, _ := CheckpointPath(dir, "held")
	cp := &Checkpoint{RunID: "held", Workflow: "durable", WorkflowDigest: "d2", State: CheckpointIncomplete, NextNode: "b",
		Trigger: map[string]any{}, Outputs: map[string]any{}, Loops: map[string]int{}}
	data, _ := EncodeJSON(cp)
	if err := WriteFileAtomic(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusErrored || !strings.Contains(rep.Outcome.Reason, "executing in another process") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	infos, bad, err := ListCheckpoints(dir)
	if err != nil || len(bad) > 0 || len(infos) != 1 || !infos[0].Active {
		t.Fatalf("list %+v %v", infos, err)
	}
	unlock()
	if runActive(dir, "held") {
		t.Fatal("released lock still active")
	}
}

func TestErroredRunMarkedThenResumed(t *testing.T) {
	dReset()
	dir := t.TempDir()
	flaky := dNode("b", "d_step")
	flaky.Reason = "fail-once"
	p := dProgram(t, "d3", []workflow.Node{dNode("a", "d_step"), flaky, dNode("c", "d_step")}, chainEdges("a", "b", "c"))
	e := &Engine{StateDir: dir}
	rep := e.Run(context.Background(), p, RunOptions{ExecutionID: "run-err", CheckpointEachNode: true})
	if rep.Outcome.Status != StatusErrored {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, err := LoadCheckpoint(dir, "run-err")
	if err != nil {
		t.Fatal(err)
	}
	if cp.State != CheckpointErrored || cp.NextNode != "b" || !strings.Contains(cp.Reason, "transient trouble") {
		t.Fatalf("checkpoint %+v", cp)
	}
	// An explicit resume re-runs the node that errored, not the ones before.
	rep = e.Run(context.Background(), p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusCompleted || rep.ExecutionID != "run-err" {
		t.Fatalf("resume %+v (id %s)", rep.Outcome, rep.ExecutionID)
	}
	if got := strings.Join(dSteped(), ","); got != "a,b,c" {
		t.Fatalf("steps %s", got)
	}
	if path, _ := CheckpointPath(dir, "run-err"); exists(t, path) {
		t.Fatal("checkpoint kept after completion")
	}
}

func TestResumeRefusesDifferentDigest(t *testing.T) {
	dReset()
	dir := t.TempDir()
	nodes := []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")}
	p1 := dProgram(t, "digest-one", nodes, chainEdges("a", "p", "b"))
	e := &Engine{StateDir: dir}
	rep := e.Run(context.Background(), p1, RunOptions{ExecutionID: "run-dig"})
	if rep.Outcome.Status != StatusPaused {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, _ := LoadCheckpoint(dir, "run-dig")
	p2 := dProgram(t, "digest-two", nodes, chainEdges("a", "p", "b"))
	rep = e.Run(context.Background(), p2, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusErrored || !strings.Contains(rep.Outcome.Reason, "different workflow") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	// Refused means untouched: still paused, still resumable by the right
	// workflow.
	if again, err := LoadCheckpoint(dir, "run-dig"); err != nil || again.State != CheckpointPaused {
		t.Fatalf("checkpoint after refusal %+v %v", again, err)
	}
	if rep := e.Run(context.Background(), p1, RunOptions{Resume: cp}); rep.Outcome.Status != StatusCompleted {
		t.Fatalf("resume %+v", rep.Outcome)
	}
}

func TestLoopCountersSurvivePauses(t *testing.T) {
	dReset()
	dir := t.TempDir()
	two := 2
	// work -> gate(pause) -> work (loop, at most twice) | done
	p := dProgram(t, "d5", []workflow.Node{dNode("work", "d_step"), dNode("gate", "d_pause"), dNode("done", "d_step")},
		[]workflow.Edge{{From: "work", To: "gate"}, {From: "gate", To: "work", MaxIterations: &two}, {From: "gate", To: "done"}})
	rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: "run-loop"})
	resumes := 0
	for rep.Outcome.Status == StatusPaused {
		if resumes++; resumes > 5 {
			t.Fatal("loop budget reset on resume: the run never leaves the loop")
		}
		cp, err := LoadCheckpoint(dir, "run-loop")
		if err != nil {
			t.Fatal(err)
		}
		// A fresh engine each time, as a new process would have.
		rep = (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{Resume: cp})
	}
	if rep.Outcome.Status != StatusCompleted || resumes != 3 {
		t.Fatalf("outcome %+v after %d resumes", rep.Outcome, resumes)
	}
	if got := strings.Join(dSteped(), ","); got != "work,work,work,done" {
		t.Fatalf("steps %s", got)
	}
}

func TestPauseAtDeadEndResumeCompletes(t *testing.T) {
	dReset()
	dir := t.TempDir()
	p := dProgram(t, "d6", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause")}, chainEdges("a", "p"))
	e := &Engine{StateDir: dir}
	rep := e.Run(context.Background(), p, RunOptions{ExecutionID: "run-end"})
	cp, _ := LoadCheckpoint(dir, "run-end")
	if rep.Outcome.Status != StatusPaused || cp.NextNode != "" {
		t.Fatalf("outcome %+v checkpoint %+v", rep.Outcome, cp)
	}
	rep = e.Run(context.Background(), p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusCompleted || rep.Outcome.LastNode != "p" {
		t.Fatalf("resume %+v", rep.Outcome)
	}
	if path, _ := CheckpointPath(dir, "run-end"); exists(t, path) {
		t.Fatal("checkpoint kept")
	}
}

func TestCheckpointHoldsNoSecretValue(t *testing.T) {
	dReset()
	const secret = "dtest-secret-9f8e7d"
	RedactValue(secret)
	dir := t.TempDir()
	p := dProgram(t, "d7", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")}, chainEdges("a", "p", "b"))
	rep := (&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: "run-sec",
		Trigger: MakeTrigger("manual", map[string]any{"secret": secret})})
	if rep.Outcome.Status != StatusPaused {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	data, err := os.ReadFile(filepath.Join(dir, "runs", "run-sec.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) || !strings.Contains(string(data), RedactedMarker) {
		t.Fatalf("checkpoint:\n%s", data)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
}

func TestListCheckpoints(t *testing.T) {
	dReset()
	dir := t.TempDir()
	if infos, bad, err := ListCheckpoints(dir); err != nil || len(bad) > 0 || len(infos) != 0 {
		t.Fatalf("empty dir: %v %v %v", infos, bad, err)
	}
	p := dProgram(t, "d8", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")}, chainEdges("a", "p", "b"))
	for _, id := range []string{"r-1", "r-2"} {
		(&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: id})
	}
	infos, bad, err := ListCheckpoints(dir)
	if err != nil || len(bad) > 0 || len(infos) != 2 {
		t.Fatalf("list %v %v %v", infos, bad, err)
	}
	for _, in := range infos {
		if in.State != CheckpointPaused || in.NextNode != "b" || in.Active || in.SavedAt.IsZero() {
			t.Fatalf("info %+v", in)
		}
	}
	if _, err := LoadCheckpoint(dir, "../escape"); err == nil {
		t.Fatal("run id with a path accepted")
	}
}

func TestResumedRunKeepsCheckpointing(t *testing.T) {
	dReset()
	dir := t.TempDir()
	flaky := dNode("c", "d_step")
	flaky.Reason = "fail-once"
	p := dProgram(t, "d9", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step"), flaky},
		chainEdges("a", "p", "b", "c"))
	e := &Engine{StateDir: dir}
	e.Run(context.Background(), p, RunOptions{ExecutionID: "run-keep"})
	cp, _ := LoadCheckpoint(dir, "run-keep")
	// Resumed (without asking for it): b runs, c errors, and the checkpoint
	// points at c, not back at b.
	rep := e.Run(context.Background(), p, RunOptions{Resume: cp})
	if rep.Outcome.Status != StatusErrored {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, _ = LoadCheckpoint(dir, "run-keep")
	if cp.State != CheckpointErrored || cp.NextNode != "c" {
		t.Fatalf("checkpoint %+v", cp)
	}
	if rep := e.Run(context.Background(), p, RunOptions{Resume: cp}); rep.Outcome.Status != StatusCompleted {
		t.Fatalf("second resume %+v", rep.Outcome)
	}
	if got := strings.Join(dSteped(), ","); got != "a,b,c" {
		t.Fatalf("steps %s", got)
	}
}

// startRecorder is an Observer that records what each run looked like
// when it was first observed.
type startRecorder struct {
	mu   sync.Mutex
	runs []string // "id start_node trigger.kind"
}

func (o *startRecorder) StartRun(ctx context.Context, r *Run) (context.Context, func(*Outcome)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	kind, _ := r.Trigger()["kind"].(string)
	o.runs = append(o.runs, r.ID()+" "+r.StartNode+" "+kind)
	return ctx, func(*Outcome) {}
}

func (o *startRecorder) StartNode(ctx context.Context, _ *Run, _ *workflow.Node, _ int) (context.Context, func(Result, error)) {
	return ctx, func(Result, error) {}
}

// TestResumedRunStartsAsItself: a resumed run is observed and audited
// with its checkpoint's start node and trigger, not the resume call's
// defaults (the first start node, a manual trigger), and hands its
// children the checkpoint's trigger kind.
func TestResumedRunStartsAsItself(t *testing.T) {
	dReset()
	dir := t.TempDir()
	p, err := Compile(&workflow.Workflow{Name: "durable", Digest: "d10",
		StartNodes: []workflow.StartNode{{Name: "first", EntryNode: "a"}, {Name: "second", EntryNode: "a"}},
		Nodes:      []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_kind")},
		Edges:      chainEdges("a", "p", "b")}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	audit, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	obs := &startRecorder{}
	e := &Engine{StateDir: dir, Audit: audit, Observer: obs}
	rep := e.Run(context.Background(), p, RunOptions{ExecutionID: "run-self", Start: "second",
		Trigger: MakeTrigger("webhook", map[string]any{"x": "y"}), CheckpointEachNode: true})
	if rep.Outcome.Status != StatusPaused {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, err := LoadCheckpoint(dir, "run-self")
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if rep := e.Run(context.Background(), p, RunOptions{Resume: cp}); rep.Outcome.Status != StatusCompleted || rep.Outcome.FinalValue != "webhook" {
		t.Fatalf("resumed outcome %+v, want completed with the trigger kind webhook", rep.Outcome)
	}
	if got := strings.Join(obs.runs, " | "); got != "run-self second webhook | run-self second webhook" {
		t.Fatalf("observed runs: %s", got)
	}
	if !strings.Contains(buf.String(), "msg=workflow.started execution_id=run-self workflow=durable start_node=second ") {
		t.Fatalf("resumed run's started event:\n%s", buf.String())
	}
}

// TestCancelledRunStaysIncomplete: a durable run cut by cancellation (its
// process shutting down) keeps an incomplete checkpoint at the node it had
// not finished, not an errored one, so --resume-incomplete continues it
// there; a run cut by its deadline is still marked errored.
func TestCancelledRunStaysIncomplete(t *testing.T) {
	dReset()
	dir := t.TempDir()
	entered := make(chan struct{})
	dWaitEntered.Store(&entered)
	p := dProgram(t, "d-cut", []workflow.Node{dNode("a", "d_step"), dNode("w", "d_wait"), dNode("b", "d_step")},
		chainEdges("a", "w", "b"))
	e := &Engine{StateDir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	rep := e.Run(ctx, p, RunOptions{ExecutionID: "run-cut", CheckpointEachNode: true})
	if rep.Outcome.Status != StatusErrored {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	cp, err := LoadCheckpoint(dir, "run-cut")
	if err != nil || cp.State != CheckpointIncomplete || cp.NextNode != "w" {
		t.Fatalf("checkpoint after the cut: %+v %v", cp, err)
	}
	if runActive(dir, "run-cut") {
		t.Fatal("cut run still holds its lock")
	}

	// Past its deadline instead: errored, for an explicit --resume.
	entered = make(chan struct{})
	dWaitEntered.Store(&entered)
	tctx, tcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer tcancel()
	e.Run(tctx, p, RunOptions{ExecutionID: "run-late", CheckpointEachNode: true})
	if cp, err := LoadCheckpoint(dir, "run-late"); err != nil || cp.State != CheckpointErrored {
		t.Fatalf("checkpoint after a deadline: %+v %v", cp, err)
	}
}
