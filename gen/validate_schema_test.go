package gen

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestCompileSchema(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile("../testdata/validate/schemas/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := compileSchema("ok.json", read("ok.json")); err != nil {
		t.Errorf("ok.json (internal $ref): %v", err)
	}
	for _, name := range []string{"remote-ref.json", "file-ref.json"} {
		if err := compileSchema(name, read(name)); !errors.Is(err, errRemoteRef) {
			t.Errorf("%s: want a refused $ref, got %v", name, err)
		}
	}
	if err := compileSchema("not-json.json", read("not-json.json")); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("not-json.json: got %v", err)
	}
	if err := compileSchema("invalid.json", read("invalid.json")); err == nil || errors.Is(err, errRemoteRef) {
		t.Errorf("invalid.json: got %v", err)
	}
}

func TestParseCron(t *testing.T) {
	ok := []string{
		"*/5 * * * *",      // 5 fields
		"0 */5 * * * *",    // 6 fields, seconds first (the seed's own example)
		"30 2 * * 1-5",     // weekdays
		"0 0 1 1 *",        // yearly
		"@hourly",          // descriptor
		"@every 90s",       // interval descriptor
		"TZ=UTC 0 9 * * *", // time zone prefix
	}
	for _, s := range ok {
		if err := parseCron(s); err != nil {
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
		"":                  "want 5 fields",
	}
	for s, want := range bad {
		if err := parseCron(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", s, err, want)
		}
	}
}

func TestParseInterval(t *testing.T) {
	ok := map[string]time.Duration{
		"30s": 30 * time.Second, "5m": 5 * time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour,
		"10 secs": 10 * time.Second, "1 min": time.Minute, "3hrs": 3 * time.Hour, "7 days": 7 * 24 * time.Hour,
	}
	for s, want := range ok {
		if got, err := parseInterval(s); err != nil || got != want {
			t.Errorf("%q = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"0s", "-5s", "5", "5w", "1.5h", "s", "", "99999999999999999999d", "9999999999999d"} {
		if _, err := parseInterval(s); err == nil {
			t.Errorf("%q: want an error", s)
		}
	}
}
