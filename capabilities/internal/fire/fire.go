// Package fire is what the trigger families (cron, interval, fswatch,
// event, the MCP resource triggers) share: a Gate that starts runs one at
// a time per trigger and audits every fire, completion, error and skipped
// tick, a Debouncer that settles bursts of changes per key, and a Clock
// that tests replace to drive schedules without waiting.
package fire

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	// Every trigger family runs long, so each gets the ops listener
	// (--ops-bind: /healthz, /readyz, /metrics) through this import.
	_ "github.com/kilnworks/kiln/capabilities/internal/ops"
	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Gate fires runs of one trigger. A tick that arrives while the previous
// run is still in flight is dropped, never queued, and audited as
// "<prefix>.skipped" (the reference dropped it silently).
type Gate struct {
	Host      *runtime.Host
	Prefix    string // audit event prefix: cron, interval, fs_watch, event
	Name      string // trigger label for the audit log
	StartNode string
	Clock     Clock

	slot Slot
	tick atomic.Int64
}

// NextTick counts a tick (fired or skipped) and returns its number, from 1.
func (g *Gate) NextTick() int64 { return g.tick.Add(1) }

// Fire starts one run with trigger kind "event" and payload (which should
// carry "type" and "tick") unless a run of this trigger is in flight. It
// returns false when the tick was skipped. The run does not inherit ctx's
// cancellation: a shutdown drains it (Wait) instead of killing it at once.
func (g *Gate) Fire(ctx context.Context, payload map[string]any) bool {
	audit := g.audit()
	if !g.slot.Claim() {
		metrics.Of(g.Host).TriggerSkipped(g.Name)
		audit.Warn(g.Prefix+".skipped", "trigger", g.Name, "start_node", g.StartNode, "tick", payload["tick"],
			"reason", "previous run still in flight")
		return false
	}
	id := runtime.NewExecutionID()
	metrics.Of(g.Host).TriggerFired(g.Name)
	audit.Info(g.Prefix+".fire", "trigger", g.Name, "start_node", g.StartNode, "tick", payload["tick"], "execution_id", id)
	g.slot.Go(ctx, func(runCtx context.Context, free func()) {
		rep := g.Host.Fire(runCtx, runtime.RunOptions{
			Start:       g.StartNode,
			Trigger:     runtime.MakeTrigger("event", runtime.Normalize(payload)),
			ExecutionID: id,
		})
		free()
		o := rep.Outcome
		attrs := []any{"trigger", g.Name, "start_node", g.StartNode, "tick", payload["tick"], "execution_id", id,
			"status", o.Status, "wall_ms", rep.WallMS}
		switch o.Status {
		case runtime.StatusCompleted, runtime.StatusPaused:
			audit.Info(g.Prefix+".completed", attrs...)
		default:
			audit.Warn(g.Prefix+".error", append(attrs, "reason", o.Reason)...)
		}
	})
	return true
}

// Busy reports whether a run of this trigger is in flight.
func (g *Gate) Busy() bool { return g.slot.Busy() }

// Wait blocks until the in-flight run (if any) has finished. After the
// host's DrainTimeout (when set) the run is cancelled, and Wait returns
// once it has stopped.
func (g *Gate) Wait() {
	g.slot.Drain(g.Host.DrainTimeout, func() {
		g.audit().Warn(g.Prefix+".drain_timeout", "trigger", g.Name, "detail", "in-flight run cancelled")
	})
}

func (g *Gate) audit() *slog.Logger {
	if g.Host.Engine.Audit != nil {
		return g.Host.Engine.Audit
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Now is the gate clock's current time.
func (g *Gate) Now() time.Time { return g.clock().Now() }

func (g *Gate) clock() Clock {
	if g.Clock == nil {
		return RealClock{}
	}
	return g.Clock
}

// Sleep waits d on the gate's clock; false when ctx ended first.
func (g *Gate) Sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-g.clock().After(d):
		return true
	}
}

// Clock is time as schedules see it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a manual clock for tests: After channels fire only when
// Advance moves time past their deadline.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	// Waiting receives once each time a new After is registered, so a test
	// can wait until the schedule loop is parked before advancing.
	Waiting chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFakeClock starts a fake clock at t.
func NewFakeClock(t time.Time) *FakeClock {
	return &FakeClock{now: t, Waiting: make(chan struct{}, 64)}
}

func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *FakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	select {
	case f.Waiting <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves time forward by d and fires every waiter now due.
func (f *FakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// Set moves time to t (forward only) and fires due waiters.
func (f *FakeClock) Set(t time.Time) {
	f.Advance(t.Sub(f.Now()))
}

// Listeners builds one listener, with build, for every trigger of type typ
// in the host's workflow (build gets the trigger's index for messages).
func Listeners[L runtime.Listener](h *runtime.Host, typ string, build func(index int, t workflow.Trigger) (L, error)) ([]runtime.Listener, error) {
	var out []runtime.Listener
	for i, t := range h.Program.Workflow.Triggers {
		if t.Type != typ {
			continue
		}
		l, err := build(i, t)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}
