// Package cron is the cron trigger family: each [[triggers]] entry of type
// "cron" becomes a serve-mode listener that starts a run at every time its
// schedule matches, one run at a time (a tick while the previous run is in
// flight is skipped and audited as cron.skipped).
//
// Schedules are parsed by robfig/cron/v3: 5 fields (minute hour
// day-of-month month day-of-week), 6 fields (seconds first, as in the
// reference's examples), or a descriptor such as @hourly; local time zone
// unless the expression starts with CRON_TZ=Zone.
package cron

import (
	"context"
	"fmt"

	robfig "github.com/robfig/cron/v3"

	cronspec "github.com/kilnworks/kiln/capabilities/cron/spec"
	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name:      "cron",
		Setup:     setup,
		Listeners: listeners,
	})
}

// ParseSchedule parses a cron schedule: the one parser configuration the
// generator uses too (capabilities/cron/spec).
var ParseSchedule = cronspec.ParseSchedule

// Validate checks every cron trigger of wf with the generator's rules, so
// a bad expression stops start-up instead of never firing.
func Validate(wf *workflow.Workflow) error {
	return spec.TriggerErr(wf, "cron", cronspec.CheckTrigger)
}

func setup(ctx context.Context, h *runtime.Host) error {
	return Validate(h.Program.Workflow)
}

func listeners(h *runtime.Host) ([]runtime.Listener, error) {
	return fire.Listeners(h, "cron", func(i int, t workflow.Trigger) (*Listener, error) {
		return NewListener(h, i, t, nil)
	})
}

// Listener fires one cron trigger.
type Listener struct {
	gate     *fire.Gate
	schedule robfig.Schedule
	expr     string
}

// NewListener builds the listener of triggers[index]; clock nil is the
// wall clock.
func NewListener(h *runtime.Host, index int, t workflow.Trigger, clock fire.Clock) (*Listener, error) {
	s, err := ParseSchedule(t.Schedule)
	if err != nil {
		return nil, fmt.Errorf("triggers[%d] (cron): %v", index, err)
	}
	if _, err := h.Program.Entry(t.StartNode); err != nil {
		return nil, fmt.Errorf("triggers[%d] (cron): start_node %q: %v", index, t.StartNode, err)
	}
	name := fmt.Sprintf("cron[%d] %s", index, t.Schedule)
	return &Listener{
		gate:     &fire.Gate{Host: h, Prefix: "cron", Name: name, StartNode: t.StartNode, Clock: clock},
		schedule: s,
		expr:     t.Schedule,
	}, nil
}

func (l *Listener) Name() string { return l.gate.Name }

// Serve fires at every scheduled time until ctx ends, then waits for the
// in-flight run.
func (l *Listener) Serve(ctx context.Context) error {
	defer l.gate.Wait()
	last := l.gate.Now()
	for {
		// Never compute from before the last fire, so a timer that wakes a
		// hair early cannot fire the same slot twice.
		from := l.gate.Now()
		if from.Before(last) {
			from = last
		}
		next := l.schedule.Next(from)
		if next.IsZero() {
			return fmt.Errorf("%s: schedule never fires", l.Name())
		}
		if !l.gate.Sleep(ctx, next.Sub(l.gate.Now())) {
			return nil
		}
		last = next
		payload := map[string]any{
			"type":             "cron",
			"schedule":         l.expr,
			"fired_at_unix_ms": l.gate.Now().UnixMilli(),
			"tick":             l.gate.NextTick(),
		}
		// In a fleet, the slot fires on the one replica that claims it.
		if fleet := runtime.TickClaimsFor(l.gate.Host.Engine); fleet == nil || l.gate.ClaimFleetTick(ctx, fleet, next, payload) {
			l.gate.Fire(ctx, payload)
		}
	}
}
