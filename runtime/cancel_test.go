package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	// t_waits: blocks until ctx ends and then, like shell_run, http_request
	// and compose do, reports it as the run deadline.
	RegisterNode(NodeKind{Kind: "t_waits", Family: "test", Prepare: func(*workflow.Node, *Program) (NodeFunc, error) {
		return func(ctx context.Context, c *Call) (Result, error) {
			<-ctx.Done()
			return Result{}, c.Errorf(ClassTimeout, "run deadline reached while waiting; killed")
		}, nil
	}})
}

// TestCancelledRunIsNotATimeout: SIGINT/SIGTERM (a cancelled context) in
// the middle of a node ends the run as errored "run cancelled", not as
// timed_out with an elapsed time that never hit any deadline.
func TestCancelledRunIsNotATimeout(t *testing.T) {
	p := compileT(t, []workflow.Node{node("w", "t_waits")}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	r := (&Engine{}).Run(ctx, p, RunOptions{Timeout: time.Minute})
	if r.Outcome.Status != StatusErrored || !strings.Contains(r.Outcome.Reason, "node w (t_waits): run cancelled") {
		t.Fatalf("outcome %+v, want errored: run cancelled", r.Outcome)
	}
	if r.Counters.WorkflowTimeouts.Load() != 0 || r.Counters.WorkflowErrored.Load() != 1 {
		t.Fatalf("counted as timeout: %+v", r.Counters.Snapshot())
	}

	// The deadline itself still times the run out.
	r = (&Engine{}).Run(context.Background(), p, RunOptions{Timeout: 20 * time.Millisecond})
	wantStatus(t, r, StatusTimedOut, "w")
}
