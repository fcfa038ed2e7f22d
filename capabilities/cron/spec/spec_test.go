package spec

import (
	"strings"
	"testing"
)

func TestParseSchedule(t *testing.T) {
	ok := []string{
		"*/5 * * * *",             // 5 fields
		"0 */5 * * * *",           // 6 fields, seconds first
		"30 2 * * 1-5",            // weekdays
		"0 0 1 1 *",               // yearly
		"@hourly",                 // descriptor
		"@every 90s",              // interval descriptor
		"TZ=UTC 0 9 * * *",        // time zone prefix
		"CRON_TZ=UTC 30 12 * * *", // the other prefix
	}
	for _, s := range ok {
		if _, err := ParseSchedule(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	bad := map[string]string{
		"*/5 * * *":         "want 5 fields",
		"* * * * * * *":     "got 7",
		"61 * * * *":        "above maximum",
		"0 0 30 2 *":        "never fires",
		"TZ=Nowhere/Land 0": "bad location",
		"TZ=UTC":            "not a cron expression", // robfig/cron panics on this; must not crash
		"CRON_TZ=UTC":       "not a cron expression",
		"@fortnightly":      "unrecognized descriptor",
		"":                  "want 5 fields",
	}
	for s, want := range bad {
		if _, err := ParseSchedule(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", s, err, want)
		}
	}
}
