// Package spec declares the interval family's trigger type, interval, and
// parses its period: one parser, one overflow bound, for the generator and
// the family (see docs/reference.md).
package spec

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the interval family's declaration.
var Family = spec.Family{
	ID: "interval",
	Triggers: []spec.Trigger{{
		Name: "interval",
		Doc: "Starts a run every period, the first one period after start-up, one run at a time (a tick while the previous run is in flight is skipped and audited as interval.skipped); " +
			"slots missed while the process was stalled are skipped, not replayed.",
		Keys: []spec.Key{{Name: "every", Type: spec.String, Required: true,
			Doc: "a positive integer and a unit: s, m, h or d (or sec(s), min(s), hr(s), day(s)), e.g. \"30s\""}},
		Limits:  []string{"the period must be positive and fit a Go duration (about 292 years)"},
		Check:   CheckTrigger,
		Payload: "{type, every_ms, fired_at_unix_ms, tick}",
	}},
}

var everyRe = regexp.MustCompile(`^\s*([0-9]+)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days)\s*$`)

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// ParseEvery parses an interval trigger's `every`.
func ParseEvery(s string) (time.Duration, error) {
	m := everyRe.FindStringSubmatch(s)
	if m == nil {
		return 0, errors.New(`want <n><unit> with unit s, m, h or d (or sec, min, hr, day), e.g. "30s"`)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := units[m[2]]
	if err != nil || n > math.MaxInt64/int64(unit) {
		return 0, errors.New("too large")
	}
	if n == 0 {
		return 0, errors.New("must be greater than zero")
	}
	return time.Duration(n) * unit, nil
}

// CheckTrigger checks an interval trigger.
func CheckTrigger(t *workflow.Trigger, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("every", t.Every != "")
	if t.Every != "" {
		if _, err := ParseEvery(t.Every); err != nil {
			is.Add("invalid_interval", "every %q: %v", t.Every, err)
		}
	}
	return is
}
