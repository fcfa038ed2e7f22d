package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func TestParseSchedule(t *testing.T) {
	base := time.Date(2026, 3, 1, 10, 2, 3, 0, time.Local)
	for _, tc := range []struct {
		expr string
		next time.Time
	}{
		{"*/5 * * * *", time.Date(2026, 3, 1, 10, 5, 0, 0, time.Local)},
		{"0 */5 * * * *", time.Date(2026, 3, 1, 10, 5, 0, 0, time.Local)},
		{"*/10 * * * * *", time.Date(2026, 3, 1, 10, 2, 10, 0, time.Local)},
		{"@hourly", time.Date(2026, 3, 1, 11, 0, 0, 0, time.Local)},
		{"@every 90s", time.Date(2026, 3, 1, 10, 3, 33, 0, time.Local)},
		{"CRON_TZ=UTC 30 12 * * *", time.Date(2026, 3, 2, 12, 30, 0, 0, time.UTC)},
	} {
		s, err := ParseSchedule(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		from := base
		if strings.HasPrefix(tc.expr, "CRON_TZ") {
			from = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)
		}
		if got := s.Next(from); !got.Equal(tc.next) {
			t.Fatalf("%s: next %v, want %v", tc.expr, got, tc.next)
		}
	}
	for _, bad := range []string{"", "* * * *", "* * * * * * *", "61 * * * *", "*/x * * * *", "@fortnightly", "CRON_TZ=UTC", "TZ=Nowhere/Land * * * * *"} {
		_, err := ParseSchedule(bad)
		if err == nil {
			t.Fatalf("%q parsed", bad)
		}
		if err := Validate(&workflow.Workflow{Triggers: []workflow.Trigger{{Type: "cron", Schedule: bad}}}); bad != "" && (err == nil || !strings.Contains(err.Error(), "triggers[0] (cron): schedule")) {
			t.Fatalf("%q: unclear error %v", bad, err)
		}
	}
}

const wfTOML = `
name = "tick"
[[start_nodes]]
name = "poll"
source = "event"
entry_node = "rec"
[[triggers]]
type = "cron"
schedule = %q
start_node = "poll"
[[nodes]]
id = "rec"
type = %q
`

func listener(t *testing.T, schedule, kind string) (*Listener, *fire.FakeClock, *firetest.Buffer) {
	t.Helper()
	firetest.Drain()
	h, buf := firetest.Host(t, fmt.Sprintf(wfTOML, schedule, kind))
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	clock := fire.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.Local))
	l, err := NewListener(h, 0, h.Program.Workflow.Triggers[0], clock)
	if err != nil {
		t.Fatal(err)
	}
	return l, clock, buf
}

// waitParked waits until the loop sleeps on the fake clock.
func waitParked(t *testing.T, c *fire.FakeClock) {
	t.Helper()
	select {
	case <-c.Waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("schedule loop never waited on the clock")
	}
}

func serve(t *testing.T, l *Listener) (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	return func() {
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestCronFiresOnInjectedClock(t *testing.T) {
	l, clock, buf := listener(t, "*/5 * * * *", "firetest_record")
	stop := serve(t, l)
	defer stop()

	waitParked(t, clock)
	clock.Advance(4 * time.Minute) // 10:04: not yet
	firetest.None(t, 50*time.Millisecond)
	clock.Advance(time.Minute) // 10:05
	trig := firetest.Next(t, 5*time.Second)
	if trig["kind"] != "event" || trig["type"] != "cron" || trig["schedule"] != "*/5 * * * *" || trig["tick"] != json.Number("1") {
		t.Fatalf("trigger %v", trig)
	}
	want := time.Date(2026, 3, 1, 10, 5, 0, 0, time.Local).UnixMilli()
	if trig["fired_at_unix_ms"] != json.Number(strconv.FormatInt(want, 10)) {
		t.Fatalf("fired_at_unix_ms %v, want %d", trig["fired_at_unix_ms"], want)
	}
	buf.WaitFor(t, "cron.completed")

	waitParked(t, clock)
	clock.Advance(5 * time.Minute) // 10:10
	if trig := firetest.Next(t, 5*time.Second); trig["tick"] != json.Number("2") {
		t.Fatalf("second trigger %v", trig)
	}
	if !strings.Contains(buf.String(), "msg=cron.fire") {
		t.Fatalf("no cron.fire audit:\n%s", buf)
	}
}

func TestCronSixFieldSeconds(t *testing.T) {
	l, clock, _ := listener(t, "*/10 * * * * *", "firetest_record")
	defer serve(t, l)()
	waitParked(t, clock)
	clock.Advance(9 * time.Second)
	firetest.None(t, 50*time.Millisecond)
	clock.Advance(time.Second)
	if trig := firetest.Next(t, 5*time.Second); trig["tick"] != json.Number("1") {
		t.Fatalf("trigger %v", trig)
	}
}

func TestCronSkipsTickWhileBusyAndAudits(t *testing.T) {
	l, clock, buf := listener(t, "* * * * *", "firetest_block")
	stop := serve(t, l)

	waitParked(t, clock)
	clock.Advance(time.Minute) // tick 1 starts and blocks
	buf.WaitFor(t, "cron.fire")
	waitParked(t, clock)
	clock.Advance(time.Minute) // tick 2: still busy
	buf.WaitFor(t, "cron.skipped")
	if !strings.Contains(buf.String(), "tick=2 reason=\"previous run still in flight\"") {
		t.Fatalf("skip not audited with its tick:\n%s", buf)
	}
	firetest.Release <- struct{}{}
	buf.WaitFor(t, "cron.completed")
	waitParked(t, clock)
	clock.Advance(time.Minute) // tick 3 runs again
	buf.WaitFor(t, "tick=3 execution_id")
	firetest.Release <- struct{}{}
	stop() // drains the in-flight run
	if n := strings.Count(buf.String(), "msg=cron.fire"); n != 2 {
		t.Fatalf("%d fires, want 2:\n%s", n, buf)
	}
	if n := strings.Count(buf.String(), "msg=cron.completed"); n != 2 {
		t.Fatalf("shutdown did not drain the in-flight run:\n%s", buf)
	}
}

func TestCronRunFailureAudited(t *testing.T) {
	l, clock, buf := listener(t, "* * * * *", "firetest_fail")
	defer serve(t, l)()
	waitParked(t, clock)
	clock.Advance(time.Minute)
	buf.WaitFor(t, "cron.error")
	if !strings.Contains(buf.String(), "status=failed") || !strings.Contains(buf.String(), "firetest failure") {
		t.Fatalf("error audit lacks status and reason:\n%s", buf)
	}
}

func TestCronBadScheduleStopsStartUp(t *testing.T) {
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, "*/5 * *", "firetest_record"))
	err := setup(context.Background(), h)
	if err == nil || !strings.Contains(err.Error(), "triggers[0] (cron)") || !strings.Contains(err.Error(), "got 3") {
		t.Fatalf("setup: %v", err)
	}
	if _, err := listeners(h); err == nil {
		t.Fatal("listeners accepted a bad schedule")
	}
}

func TestListenersOnePerCronTrigger(t *testing.T) {
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, "@daily", "firetest_record")+`
[[triggers]]
type = "cron"
schedule = "0 0 * * * *"
start_node = "poll"
[[triggers]]
type = "interval"
every = "5s"
start_node = "poll"
`)
	ls, err := listeners(h)
	if err != nil || len(ls) != 2 {
		t.Fatalf("listeners %v, %v", ls, err)
	}
	if ls[1].Name() != "cron[1] 0 0 * * * *" {
		t.Fatalf("name %q", ls[1].Name())
	}
}
