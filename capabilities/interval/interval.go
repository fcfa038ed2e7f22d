// Package interval is the interval trigger family: each [[triggers]] entry
// of type "interval" starts a run every `every` (first fire one period
// after start-up; in a fleet, at the next multiple of every: see
// docs/scaling.md), one run at a time; a tick while the previous run is in
// flight is skipped and audited as interval.skipped.
package interval

import (
	"context"
	"fmt"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
	intervalspec "github.com/kilnworks/kiln/capabilities/interval/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name:      "interval",
		Setup:     setup,
		Listeners: listeners,
	})
}

// ParseEvery parses `every`: the one parser and overflow bound the
// generator uses too (capabilities/interval/spec).
var ParseEvery = intervalspec.ParseEvery

// Validate checks every interval trigger of wf with the generator's rules.
func Validate(wf *workflow.Workflow) error {
	return spec.TriggerErr(wf, "interval", intervalspec.CheckTrigger)
}

func setup(ctx context.Context, h *runtime.Host) error { return Validate(h.Program.Workflow) }

func listeners(h *runtime.Host) ([]runtime.Listener, error) {
	return fire.Listeners(h, "interval", func(i int, t workflow.Trigger) (*Listener, error) {
		return NewListener(h, i, t, nil)
	})
}

// Listener fires one interval trigger.
type Listener struct {
	gate  *fire.Gate
	every time.Duration
}

// NewListener builds the listener of triggers[index]; clock nil is the
// wall clock.
func NewListener(h *runtime.Host, index int, t workflow.Trigger, clock fire.Clock) (*Listener, error) {
	every, err := ParseEvery(t.Every)
	if err != nil {
		return nil, fmt.Errorf("triggers[%d] (interval): %v", index, err)
	}
	if _, err := h.Program.Entry(t.StartNode); err != nil {
		return nil, fmt.Errorf("triggers[%d] (interval): start_node %q: %v", index, t.StartNode, err)
	}
	return &Listener{
		gate:  &fire.Gate{Host: h, Prefix: "interval", Name: fmt.Sprintf("interval[%d] %s", index, t.Every), StartNode: t.StartNode, Clock: clock},
		every: every,
	}, nil
}

func (l *Listener) Name() string { return l.gate.Name }

// Serve fires at a fixed rate until ctx ends, then waits for the in-flight
// run. Slots missed while the process was stalled are skipped, not
// replayed in a burst. In a fleet (a shared state backend) slots are
// multiples of every on the wall clock, so replicas agree on them, and
// each slot fires on the one replica that claims it (docs/scaling.md).
func (l *Listener) Serve(ctx context.Context) error {
	defer l.gate.Wait()
	fleet := runtime.TickClaimsFor(l.gate.Host.Engine)
	next := l.gate.Now().Add(l.every)
	if fleet != nil {
		next = l.gate.Now().Truncate(l.every).Add(l.every)
	}
	for {
		if !l.gate.Sleep(ctx, next.Sub(l.gate.Now())) {
			return nil
		}
		payload := map[string]any{
			"type":             "interval",
			"every_ms":         l.every.Milliseconds(),
			"fired_at_unix_ms": l.gate.Now().UnixMilli(),
			"tick":             l.gate.NextTick(),
		}
		if fleet == nil || l.gate.ClaimFleetTick(ctx, fleet, next, payload) {
			l.gate.Fire(ctx, payload)
		}
		now := l.gate.Now()
		for !next.After(now) {
			next = next.Add(l.every)
		}
	}
}
