package tape

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
)

// replaySource answers a replayed run's outside requests from a tape. A
// request is answered by the first unused recorded interaction of the same
// node and kind whose request is the same JSON; anything else is refused
// and noted, never performed.
type replaySource struct {
	tape *Tape

	mu         sync.Mutex
	used       []bool
	byNode     map[string][]int // node and kind → indexes of the tape's interactions, in order
	unanswered []Unanswered
}

func newReplaySource(t *Tape) *replaySource {
	s := &replaySource{tape: t, used: make([]bool, len(t.Interactions)), byNode: map[string][]int{}}
	for i, x := range t.Interactions {
		k := x.Node + "\x00" + x.Kind
		s.byNode[k] = append(s.byNode[k], i)
	}
	return s
}

// Unanswered is an outside request of the replayed workflow that the tape
// holds no answer for (a changed prompt, URL, tool argument).
type Unanswered struct {
	Node    string          `json:"node"`
	Kind    string          `json:"kind"`
	Request json.RawMessage `json:"request"`
	// Recorded is the tape's first unused request of the same node and
	// kind, when there is one: what the request was before the change.
	Recorded json.RawMessage `json:"recorded,omitempty"`
}

func (s *replaySource) answer(c *runtime.Call, x *Interaction) (any, error) {
	want := compact(x.Request)
	s.mu.Lock()
	defer s.mu.Unlock()
	var recorded json.RawMessage
	for _, i := range s.byNode[x.Node+"\x00"+x.Kind] {
		old := &s.tape.Interactions[i]
		if s.used[i] {
			continue
		}
		if recorded == nil {
			recorded = old.Request
		}
		if !bytes.Equal(compact(old.Request), want) {
			continue
		}
		s.used[i] = true
		x.Response = old.Response
		if old.Error != nil && old.Error.Denial != nil {
			d := old.Error.Denial
			return nil, &policy.Denial{What: d.What, Target: d.Target, Reason: d.Reason, Source: d.Source}
		}
		if old.Error != nil && old.Error.Class == "" {
			return nil, errors.New(old.Error.Message)
		}
		if old.Error != nil {
			return nil, &runtime.Error{Class: runtime.Class(old.Error.Class), Msg: old.Error.Message}
		}
		return json.RawMessage(old.Response), nil
	}
	s.unanswered = append(s.unanswered, Unanswered{Node: x.Node, Kind: x.Kind, Request: x.Request, Recorded: recorded})
	// A configuration error: the engine does not retry it.
	return nil, c.Errorf(runtime.ClassConfig, "replay: the tape holds no answer for this %s request; it was not sent", x.Kind)
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// Result is how one tape replayed.
type Result struct {
	Tape string `json:"tape"` // the file, when read from one
	Same bool   `json:"same"`
	// DigestChanged: the workflow replayed is not the one recorded.
	DigestChanged bool        `json:"digest_changed"`
	OldStatus     string      `json:"old_status"`
	NewStatus     string      `json:"new_status"`
	Divergence    *Divergence `json:"divergence,omitempty"`
	// Unanswered are the requests the tape could not answer (not sent).
	Unanswered []Unanswered `json:"unanswered,omitempty"`
	// Unused are recorded interactions the replay never asked for.
	Unused []Interaction `json:"unused,omitempty"`
	// Replayed is the tape of the replayed run (for the side-by-side
	// timeline).
	Replayed *Tape `json:"-"`
	Old      *Tape `json:"-"`
}

// Divergence is the first place the replay differs from the tape.
type Divergence struct {
	Step int    `json:"step"` // index in the top-level path (0-based); -1: after the path
	Node string `json:"node"`
	// What differs: path, status, branch, output, request, outcome.
	What string `json:"what"`
	Old  any    `json:"old"`
	New  any    `json:"new"`
}

// Replay runs the tape's trigger on p with every outside interaction
// answered from the tape: nothing is sent, written or spawned. The run gets
// the tape's run id and start node, and a clock that reads the tape's
// start time; retries do not wait.
func Replay(ctx context.Context, p *runtime.Program, old *Tape) (*Result, error) {
	if _, err := p.Entry(old.StartNode); err != nil {
		return nil, fmt.Errorf("start node of the tape: %v", err)
	}
	at, err := time.Parse(time.RFC3339Nano, old.StartedAt)
	if err != nil {
		at = time.Unix(0, 0).UTC()
	}
	src := newReplaySource(old)
	rec := &Recorder{replay: src, begun: time.Now()}
	e := &runtime.Engine{
		Services: &runtime.Services{Secret: func(name string) (string, error) {
			return "", fmt.Errorf("secret %s: a replay resolves no secret", name)
		}},
		Now:      func() time.Time { return at },
		Sleep:    func(context.Context, time.Duration) error { return nil },
		Observer: Observer(nil),
	}
	if pauses(p) {
		// A pause saves a checkpoint: into a private directory that goes
		// with the replay, so the replay leaves nothing behind.
		dir, err := os.MkdirTemp("", "kiln-replay-*")
		if err != nil {
			return nil, fmt.Errorf("replay state directory: %v", err)
		}
		defer removeState(dir, old.ExecutionID)
		e.StateDir = dir
	}
	rep := e.Run(runtime.WithOutside(ctx, rec), p, runtime.RunOptions{
		Start: old.StartNode, Trigger: old.Trigger, ExecutionID: old.ExecutionID,
	})
	nt, err := rec.Tape(p, old.Trigger, rep)
	if err != nil {
		return nil, err
	}
	nt.StartedAt = old.StartedAt
	// No round trip through JSON is needed to compare: the engine's
	// values are already JSON values (numbers as json.Number, compared by
	// value with runtime.Equal), as are the recorded ones.
	res := &Result{Old: old, Replayed: nt, OldStatus: old.Status, NewStatus: nt.Status,
		DigestChanged: old.WorkflowDigest != p.Workflow.Digest}
	src.mu.Lock()
	res.Unanswered = src.unanswered
	for i, u := range src.used {
		if !u {
			res.Unused = append(res.Unused, old.Interactions[i])
		}
	}
	src.mu.Unlock()
	res.Divergence = diverge(old, nt, res.Unanswered, res.Unused)
	res.Same = res.Divergence == nil
	return res, nil
}

// diverge finds the first difference between the recorded and the
// replayed run: along the path first (node, status, branch, output), then
// the outcome, then the outside requests.
func diverge(old, nt *Tape, unanswered []Unanswered, unused []Interaction) *Divergence {
	oe, ne := old.Trace.Entries, nt.Trace.Entries
	for i := 0; i < max(len(oe), len(ne)); i++ {
		if i >= len(oe) || i >= len(ne) {
			d := &Divergence{Step: i, What: "path"}
			if i < len(oe) {
				d.Node, d.Old = oe[i].NodeID, oe[i].NodeID
			} else {
				d.Node, d.New = ne[i].NodeID, ne[i].NodeID
			}
			return d
		}
		o, n := oe[i], ne[i]
		switch {
		case o.NodeID != n.NodeID:
			return &Divergence{Step: i, Node: n.NodeID, What: "path", Old: o.NodeID, New: n.NodeID}
		case o.Outcome != n.Outcome || !runtime.Equal(o.Branch, n.Branch) || !runtime.Equal(o.Output, n.Output):
			if u := unansweredAt(unanswered, n.NodeID); u != nil {
				return &Divergence{Step: i, Node: n.NodeID, What: "request", Old: u.Recorded, New: u.Request}
			}
			if o.Outcome != n.Outcome {
				return &Divergence{Step: i, Node: n.NodeID, What: "status", Old: o.Outcome, New: n.Outcome}
			}
			if !runtime.Equal(o.Branch, n.Branch) {
				return &Divergence{Step: i, Node: n.NodeID, What: "branch", Old: o.Branch, New: n.Branch}
			}
			return &Divergence{Step: i, Node: n.NodeID, What: "output", Old: o.Output, New: n.Output}
		}
	}
	if old.Status != nt.Status || !bytes.Equal(compact(old.Detail), compact(nt.Detail)) {
		return &Divergence{Step: -1, Node: anyString(nt.LastNode), What: "outcome", Old: old.Detail, New: nt.Detail}
	}
	if len(unanswered) > 0 {
		u := unanswered[0]
		return &Divergence{Step: -1, Node: u.Node, What: "request", Old: u.Recorded, New: u.Request}
	}
	if len(unused) > 0 {
		u := unused[0]
		return &Divergence{Step: -1, Node: u.Node, What: "request", Old: u.Request, New: nil}
	}
	return nil
}

func unansweredAt(us []Unanswered, node string) *Unanswered {
	for i := range us {
		if us[i].Node == node {
			return &us[i]
		}
	}
	return nil
}

func anyString(v any) string {
	s, _ := v.(string)
	return s
}

// removeState removes the replay's state directory: the one checkpoint a
// pause wrote and the directories (os.RemoveAll costs every sealed binary
// several KB for a tree this function knows).
func removeState(dir, runID string) {
	if cp, err := runtime.CheckpointPath(dir, runID); err == nil {
		os.Remove(cp)
		os.Remove(filepath.Dir(cp))
	}
	os.Remove(dir)
}

// pauses reports whether p's top level can pause for approval.
func pauses(p *runtime.Program) bool {
	for _, n := range p.Workflow.Nodes {
		if n.Type == "pause_for_approval" {
			return true
		}
	}
	return false
}
