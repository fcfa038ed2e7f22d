package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cronspec "github.com/kilnworks/kiln/capabilities/cron/spec"
	"github.com/kilnworks/kiln/runtime/testtool"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
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

// Several cron triggers give one CronJob and one service + timer pair
// each, every one starting its own trigger's start node.
func TestSeveralSchedules(t *testing.T) {
	sp := &Spec{Name: "multi", Workflow: "multi", ManifestDigest: "sha256:" + strings.Repeat("0", 64), KilnVersion: "devel",
		Mode: ModeCron, Port: Port, DrainSecs: DrainSecs, GraceSecs: GraceSecs, UID: UID}
	for _, c := range []struct{ expr, start string }{{"0 6 * * *", "morning"}, {"0 18 * * 1-5", "evening"}} {
		sc, err := translateCron(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		sc.StartNode = c.start
		sp.Schedules = append(sp.Schedules, sc)
	}
	files, err := K8s(sp, "multi@sha256:"+strings.Repeat("1", 64), false)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(files[0].Data), "\n---\n")
	var jobs []batchv1.CronJob
	for _, d := range docs[1:] {
		if strings.Contains(d, "\nkind: CronJob\n") {
			var cj batchv1.CronJob
			if err := yaml.UnmarshalStrict([]byte(d), &cj); err != nil {
				t.Fatalf("%v\n%s", err, d)
			}
			jobs = append(jobs, cj)
		}
	}
	if len(jobs) != 2 || jobs[0].Name != "multi-1" || jobs[1].Name != "multi-2" ||
		strings.Join(jobs[1].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, " ") != "--start evening once" ||
		jobs[1].Spec.Schedule != "0 18 * * 1-5" {
		t.Fatalf("cron jobs: %+v", jobs)
	}

	sa := testtool.Command(t, "systemd-analyze")
	self, err := os.Executable() // any existing file will do for ExecStart
	if err != nil {
		t.Fatal(err)
	}
	units, err := Systemd(sp, self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := WriteFiles(dir, units); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range units {
		names = append(names, u.Name)
		if out, err := exec.Command(sa, "verify", filepath.Join(dir, u.Name)).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("verify %s: %v\n%s", u.Name, err, out)
		}
	}
	if strings.Join(names, " ") != "multi-1.service multi-1.timer multi-2.service multi-2.timer" {
		t.Fatalf("units %v", names)
	}
	if !strings.Contains(string(units[2].Data), "--start evening once\n") || !strings.Contains(string(units[3].Data), "Unit=multi-2.service\n") {
		t.Errorf("multi-2 units:\n%s\n%s", units[2].Data, units[3].Data)
	}
}
