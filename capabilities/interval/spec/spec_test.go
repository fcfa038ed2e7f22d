package spec

import (
	"testing"
	"time"
)

func TestParseEvery(t *testing.T) {
	ok := map[string]time.Duration{
		"30s": 30 * time.Second, "5m": 5 * time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour,
		"10 secs": 10 * time.Second, "1 min": time.Minute, "3hrs": 3 * time.Hour, "7 days": 7 * 24 * time.Hour,
		" 1 day ": 24 * time.Hour,
	}
	for s, want := range ok {
		if got, err := ParseEvery(s); err != nil || got != want {
			t.Errorf("%q = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"0s", "-5s", "5", "5w", "1.5h", "s", "", "99999999999999999999d", "9999999999999d", "106752d"} {
		if _, err := ParseEvery(s); err == nil {
			t.Errorf("%q: want an error", s)
		}
	}
	// The largest period that fits a duration.
	if _, err := ParseEvery("106751d"); err != nil {
		t.Errorf("106751d: %v", err)
	}
}
