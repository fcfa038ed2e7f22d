// Package spec declares the cron family's trigger type, cron, and parses
// its schedules: one parser configuration for the generator and the
// family (see docs/reference.md).
package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the cron family's declaration.
var Family = spec.Family{
	ID: "cron",
	Triggers: []spec.Trigger{{
		Name: "cron",
		Doc: "Starts a run at every time the schedule matches, one run at a time (a tick while the previous run is in flight is skipped and audited as cron.skipped). " +
			"Local time zone unless the schedule starts with CRON_TZ=Zone.",
		Keys: []spec.Key{{Name: "schedule", Type: spec.String, Required: true,
			Doc: "5 fields (minute hour day-of-month month day-of-week), 6 (seconds first) or a descriptor such as @hourly"}},
		Limits:  []string{"a schedule that never fires (30 February) is refused"},
		Check:   CheckTrigger,
		Payload: "{type, schedule, fired_at_unix_ms, tick}",
	}},
}

// parser accepts the 5-field form (minute first), the 6-field form with
// seconds first, and descriptors such as @hourly.
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// ParseSchedule parses a cron schedule; one that never fires is an error.
func ParseSchedule(expr string) (s robfig.Schedule, err error) {
	// robfig/cron panics on some malformed TZ= prefixes; a schedule is
	// author input, so turn any panic into an error.
	defer func() {
		if recover() != nil {
			s, err = nil, errors.New("not a cron expression")
		}
	}()
	// With a time zone prefix the parser counts the fields itself.
	if n := len(strings.Fields(expr)); !strings.HasPrefix(expr, "@") && !strings.Contains(expr, "TZ=") && n != 5 && n != 6 {
		return nil, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got %d", n)
	}
	if s, err = parser.Parse(expr); err != nil {
		return nil, err
	}
	// A schedule that never fires (30 February) is a mistake, not a trigger.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("never fires")
	}
	return s, nil
}

// CheckTrigger checks a cron trigger.
func CheckTrigger(t *workflow.Trigger, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("schedule", t.Schedule != "")
	if t.Schedule != "" {
		if _, err := ParseSchedule(t.Schedule); err != nil {
			is.Add("invalid_cron", "schedule %q: %v", t.Schedule, err)
		}
	}
	return is
}
