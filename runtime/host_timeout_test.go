package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestHostRunTimeoutBoundsEveryRun: --timeout-secs reaches the host, and
// every run a listener fires (HTTP routes, cron, ...) gets that deadline
// unless it asks for its own. Before, serve-mode runs ignored the flag.
func TestHostRunTimeoutBoundsEveryRun(t *testing.T) {
	slow := 2000
	p := compileT(t, []workflow.Node{{ID: "s", Type: "t_sleep", MaxTokens: &slow}}, nil)
	h := &Host{Engine: &Engine{}, Program: p, RunTimeout: 50 * time.Millisecond}
	start := time.Now()
	rep := h.Fire(context.Background(), RunOptions{})
	if rep.Outcome.Status != StatusTimedOut || time.Since(start) > time.Second {
		t.Fatalf("status %s after %v, want timed_out after ~50ms", rep.Outcome.Status, time.Since(start))
	}
	// A run's own timeout wins over the host's.
	fast := 10
	p = compileT(t, []workflow.Node{{ID: "s", Type: "t_sleep", MaxTokens: &fast}}, nil)
	h = &Host{Engine: &Engine{}, Program: p, RunTimeout: time.Nanosecond}
	if rep := h.Fire(context.Background(), RunOptions{Timeout: time.Minute}); rep.Outcome.Status != StatusCompleted {
		t.Fatalf("own timeout: status %s", rep.Outcome.Status)
	}
}
