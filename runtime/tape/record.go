package tape

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Recorder is the runtime.Outside of a recorded run: it performs every
// interaction and logs the request and answer, and (through Observer) every
// node attempt. One Recorder serves one run and its child runs.
type Recorder struct {
	// replay, when set, answers from this tape instead of performing
	// (replay.go); the log is kept the same way, for the new run's tape.
	replay *replaySource

	mu           sync.Mutex
	begun        time.Time
	attempts     []Attempt
	interactions []Interaction
}

// NewRecorder returns a recorder for one run.
func NewRecorder() *Recorder { return &Recorder{begun: time.Now()} }

// Interact performs the interaction (or, replaying, answers it from the
// tape) and logs it.
func (r *Recorder) Interact(ctx context.Context, c *runtime.Call, kind string, req any, perform func() (any, error)) (any, error) {
	reqJSON, err := runtime.EncodeJSON(req)
	if err != nil {
		return nil, c.Errorf(runtime.ClassTool, "record %s request: %v", kind, err)
	}
	x := Interaction{Node: c.Node.ID, Attempt: c.Attempt, Kind: kind, Request: reqJSON}
	var v any
	if r.replay != nil {
		v, err = r.replay.answer(c, &x)
	} else {
		v, err = perform()
		if err == nil {
			if x.Response, err = runtime.EncodeJSON(v); err != nil {
				err = c.Errorf(runtime.ClassTool, "record %s answer: %v", kind, err)
			}
		}
	}
	x.Error = errOf(err)
	r.mu.Lock()
	x.Seq = len(r.interactions)
	r.interactions = append(r.interactions, x)
	r.mu.Unlock()
	return v, err
}

// Observer wraps next (nil: none) so the attempts of runs started with a
// *Recorder in their context are logged; other runs only reach next.
func Observer(next runtime.Observer) runtime.Observer { return observer{next} }

type observer struct{ next runtime.Observer }

func (o observer) StartRun(ctx context.Context, r *runtime.Run) (context.Context, func(*runtime.Outcome)) {
	if o.next != nil {
		return o.next.StartRun(ctx, r)
	}
	return ctx, func(*runtime.Outcome) {}
}

func (o observer) StartNode(ctx context.Context, run *runtime.Run, n *workflow.Node, attempt int) (context.Context, func(runtime.Result, error)) {
	var end func(runtime.Result, error)
	if o.next != nil {
		ctx, end = o.next.StartNode(ctx, run, n, attempt)
	}
	rec, ok := runtime.OutsideFrom(ctx).(*Recorder)
	if !ok {
		if end == nil {
			end = func(runtime.Result, error) {}
		}
		return ctx, end
	}
	start := time.Now()
	return ctx, func(res runtime.Result, err error) {
		if end != nil {
			end(res, err)
		}
		a := Attempt{Node: n.ID, Kind: n.Type, Attempt: attempt, Depth: run.Depth,
			DurationMS: time.Since(start).Milliseconds(), Status: res.Action.String(), Branch: res.Branch, Output: res.Value}
		if err != nil {
			a.Status, a.Output, a.Branch, a.Error = "error", nil, "", errOf(err)
		}
		rec.mu.Lock()
		a.StartMS = start.Sub(rec.begun).Milliseconds()
		rec.attempts = append(rec.attempts, a)
		rec.mu.Unlock()
	}
}

// Tape builds the run's tape from its report. trigger is the trigger the
// run started with.
func (r *Recorder) Tape(p *runtime.Program, trigger map[string]any, rep *runtime.Report) (*Tape, error) {
	detail, err := runtime.EncodeJSON(rep.Outcome)
	if err != nil {
		return nil, err
	}
	var last any
	if rep.Outcome.LastNode != "" {
		last = rep.Outcome.LastNode
	}
	cost := map[string]any{}
	for k, v := range rep.Counters.Snapshot() {
		cost[k] = v
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := &Tape{
		Tape: Version, Workflow: p.Workflow.Name, WorkflowDigest: p.Workflow.Digest,
		StartNode: rep.StartNode, ExecutionID: rep.ExecutionID,
		StartedAt: r.begun.UTC().Format(time.RFC3339Nano),
		Status:    rep.Outcome.Status, LastNode: last, Detail: json.RawMessage(detail), WallMS: rep.WallMS,
		Cost: cost, Trigger: trigger, Trace: rep.Trace,
		Attempts:     append([]Attempt(nil), r.attempts...),
		Interactions: append([]Interaction(nil), r.interactions...),
	}
	type attemptKey struct {
		node    string
		attempt int
	}
	made := map[attemptKey][]int{}
	for _, x := range t.Interactions {
		k := attemptKey{x.Node, x.Attempt}
		made[k] = append(made[k], x.Seq)
	}
	for i := range t.Attempts {
		a := &t.Attempts[i]
		a.Input = made[attemptKey{a.Node, a.Attempt}]
	}
	if t.Trace == nil {
		t.Trace = &runtime.Trace{ExecutionID: rep.ExecutionID, Entries: []runtime.TraceEntry{}}
	}
	if t.Attempts == nil {
		t.Attempts = []Attempt{}
	}
	if t.Interactions == nil {
		t.Interactions = []Interaction{}
	}
	return t, nil
}
