// Package interval is the interval trigger family: each [[triggers]] entry
// of type "interval" starts a run every `every` (first fire one period
// after start-up), one run at a time; a tick while the previous run is in
// flight is skipped and audited as interval.skipped.
package interval

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
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

var everyPattern = regexp.MustCompile(`^\s*([0-9]+)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days)\s*$`)

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// ParseEvery parses `every`: a positive integer and a unit (s, sec, secs,
// m, min, mins, h, hr, hrs, d, day, days).
func ParseEvery(s string) (time.Duration, error) {
	m := everyPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("every %q: want a positive integer and a unit s|m|h|d (sec/secs/min/mins/hr/hrs/day/days), e.g. \"30s\"", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := units[m[2]]
	if err != nil || n <= 0 || n > int64(1<<62)/int64(unit) {
		return 0, fmt.Errorf("every %q: the count must be positive and fit a duration", s)
	}
	return time.Duration(n) * unit, nil
}

// Validate checks every interval trigger of wf.
func Validate(wf *workflow.Workflow) error {
	for i, t := range wf.Triggers {
		if t.Type != "interval" {
			continue
		}
		if _, err := ParseEvery(t.Every); err != nil {
			return fmt.Errorf("triggers[%d] (interval): %v", i, err)
		}
	}
	return nil
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
// replayed in a burst.
func (l *Listener) Serve(ctx context.Context) error {
	defer l.gate.Wait()
	next := l.gate.Now().Add(l.every)
	for {
		if !l.gate.Sleep(ctx, next.Sub(l.gate.Now())) {
			return nil
		}
		l.gate.Fire(ctx, map[string]any{
			"type":             "interval",
			"every_ms":         l.every.Milliseconds(),
			"fired_at_unix_ms": l.gate.Now().UnixMilli(),
			"tick":             l.gate.NextTick(),
		})
		now := l.gate.Now()
		for !next.After(now) {
			next = next.Add(l.every)
		}
	}
}
