package deploy

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	cronspec "github.com/kilnworks/kiln/capabilities/cron/spec"
	"github.com/kilnworks/kiln/runtime/testtool"
)

var elapse = regexp.MustCompile(`(?m)^\s+(?:Next elapse|Iter\. #\d+): (.+)$`)

// A translated schedule fires at exactly the times the workflow's own
// cron parser gives, as systemd computes them.
func TestCronMatchesSystemd(t *testing.T) {
	sa := testtool.Command(t, "systemd-analyze")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, expr := range []string{
		"*/5 * * * *", "0 */5 * * * *", "30 9 * * 1-5", "0 0 * * 0-2", "15 3 1,15 * *",
		"0 12 * */3 *", "5 4 * * 6", "10-20 8 * * *", "@hourly", "@daily", "@weekly", "@monthly", "@yearly",
		"CRON_TZ=Europe/Paris 0 6 * * *",
	} {
		sc, err := translateCron(expr)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		cmd := exec.Command(sa, "calendar", "--iterations=6", "--base-time="+base.Format("2006-01-02 15:04:05")+" UTC", sc.OnCalendar)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q -> OnCalendar %q: %v\n%s", expr, sc.OnCalendar, err, out)
			continue
		}
		var got []string
		for _, m := range elapse.FindAllStringSubmatch(string(out), -1) {
			tm, err := time.Parse("Mon 2006-01-02 15:04:05 MST", strings.TrimSpace(m[1]))
			if err != nil {
				t.Fatalf("%q: %v", expr, err)
			}
			got = append(got, tm.UTC().Format(time.RFC3339))
		}
		rs, err := cronspec.ParseSchedule(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		var want []string
		for next := base; len(want) < 6; {
			next = rs.Next(next)
			want = append(want, next.UTC().Format(time.RFC3339))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%q -> OnCalendar %q fires at\n  %v\nthe workflow's cron at\n  %v", expr, sc.OnCalendar, got, want)
		}
	}
}

// Expressions a CronJob or timer would read differently are refused.
func TestCronRefusesWhatDoesNotTranslate(t *testing.T) {
	for _, expr := range []string{"@every 90s", "0 0 1 * 1", "1-10/2 * * * *", "30 * * * * *", "* * * * MON", "61 * * * *", "5 4 * * 7", "* * * *", "CRON_TZ=UTC"} {
		if sc, err := translateCron(expr); err == nil {
			t.Errorf("%q translated to %+v, want an error", expr, sc)
		}
	}
}
