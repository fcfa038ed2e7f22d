package gen

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/kilnworks/kiln/capabilities/schema"
)

// errRemoteRef marks a schema that tried to load another document.
var errRemoteRef = errors.New("remote $ref")

// checkSchema compiles a JSON Schema from its loaded bytes. Nothing is
// ever fetched: every $ref outside the document itself is an issue.
func (c *checker) checkSchema(where, key, path string, data []byte) {
	if err := compileSchema(path, data); err != nil {
		code := "schema_invalid"
		if errors.Is(err, errRemoteRef) {
			code = "schema_remote_ref"
		}
		c.add(code, "%s: %s %q: %v", where, key, path, err)
	}
}

func compileSchema(path string, data []byte) error {
	_, err := schema.Compile(path, data)
	var re *schema.RefError
	var je *schema.JSONError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("%w %s is not allowed: schemas are compiled offline and may only use $ref within the document", errRemoteRef, re.Ref)
	case errors.As(err, &je):
		return fmt.Errorf("not valid JSON: %v", je.Err)
	case err != nil:
		return fmt.Errorf("does not compile as JSON Schema: %v", err)
	}
	return nil
}

// cronParser accepts the 5-field form (minute first) and the 6-field form
// with seconds first, plus @hourly-style descriptors.
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parseCron(spec string) (err error) {
	// robfig/cron panics on some malformed TZ= prefixes; a schedule is
	// author input, so turn any panic into an issue.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not a cron expression")
		}
	}()
	if n := len(strings.Fields(spec)); !strings.HasPrefix(spec, "@") && !strings.Contains(spec, "TZ=") && n != 5 && n != 6 {
		return fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got %d", n)
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return err
	}
	// A schedule that never fires (30 February) is a mistake, not a trigger.
	if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return fmt.Errorf("never fires")
	}
	return nil
}

var intervalRe = regexp.MustCompile(`^([0-9]+)\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days)$`)

var intervalUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// parseInterval parses an interval trigger's `every`: <n>s|m|h|d, or the
// units sec(s), min(s), hr(s), day(s); n > 0.
func parseInterval(s string) (time.Duration, error) {
	m := intervalRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("want <n><unit> with unit s, m, h or d (or sec, min, hr, day), e.g. \"30s\"")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := intervalUnits[m[2]]
	if err != nil || n > math.MaxInt64/int64(unit) {
		return 0, fmt.Errorf("too large")
	}
	if n == 0 {
		return 0, fmt.Errorf("must be greater than zero")
	}
	return time.Duration(n) * unit, nil
}
