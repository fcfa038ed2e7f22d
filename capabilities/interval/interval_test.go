package interval

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
)

func TestParseEvery(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"30s": 30 * time.Second, "1 sec": time.Second, "2secs": 2 * time.Second,
		"5m": 5 * time.Minute, "5min": 5 * time.Minute, "5 mins": 5 * time.Minute,
		"2h": 2 * time.Hour, "1hr": time.Hour, "3hrs": 3 * time.Hour,
		"1d": 24 * time.Hour, "1day": 24 * time.Hour, "2 days": 48 * time.Hour,
	} {
		got, err := ParseEvery(in)
		if err != nil || got != want {
			t.Fatalf("%q: %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "0s", "-1s", "5", "5w", "1.5h", "s", "99999999999999999999d"} {
		if _, err := ParseEvery(bad); err == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

const wfTOML = `
name = "beat"
[[start_nodes]]
name = "heartbeat"
source = "event"
entry_node = "rec"
[[triggers]]
type = "interval"
every = %q
start_node = "heartbeat"
[[nodes]]
id = "rec"
type = %q
`

func TestIntervalFiresEveryPeriod(t *testing.T) {
	firetest.Drain()
	h, buf := firetest.Host(t, fmt.Sprintf(wfTOML, "30s", "firetest_record"))
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	ls, err := listeners(h)
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners %v %v", ls, err)
	}
	clock := fire.NewFakeClock(time.Unix(1_700_000_000, 0))
	l, err := NewListener(h, 0, h.Program.Workflow.Triggers[0], clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()

	for tick := 1; tick <= 3; tick++ {
		<-clock.Waiting
		clock.Advance(29 * time.Second)
		firetest.None(t, 20*time.Millisecond)
		clock.Advance(time.Second)
		trig := firetest.Next(t, 5*time.Second)
		wantAt := time.Unix(1_700_000_000+int64(30*tick), 0).UnixMilli()
		if trig["kind"] != "event" || trig["type"] != "interval" || trig["every_ms"] != json.Number("30000") ||
			trig["tick"] != json.Number(fmt.Sprint(tick)) || trig["fired_at_unix_ms"] != json.Number(fmt.Sprint(wantAt)) {
			t.Fatalf("tick %d trigger %v", tick, trig)
		}
		buf.WaitFor(t, fmt.Sprintf("msg=interval.completed trigger=\"interval[0] 30s\" start_node=heartbeat tick=%d", tick))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestIntervalSkipsWhileBusy(t *testing.T) {
	firetest.Drain()
	h, buf := firetest.Host(t, fmt.Sprintf(wfTOML, "1s", "firetest_block"))
	clock := fire.NewFakeClock(time.Unix(1_700_000_000, 0))
	l, _ := NewListener(h, 0, h.Program.Workflow.Triggers[0], clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(ctx) }()
	<-clock.Waiting
	clock.Advance(time.Second)
	buf.WaitFor(t, "interval.fire")
	<-clock.Waiting
	clock.Advance(time.Second)
	buf.WaitFor(t, "interval.skipped")
	firetest.Release <- struct{}{}
	cancel()
	<-done
	if strings.Count(buf.String(), "interval.fire") != 1 {
		t.Fatalf("audit:\n%s", buf)
	}
}

func TestIntervalBadEveryStopsStartUp(t *testing.T) {
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, "soon", "firetest_record"))
	if err := setup(context.Background(), h); err == nil || !strings.Contains(err.Error(), "triggers[0] (interval)") {
		t.Fatalf("setup: %v", err)
	}
}

func TestIntervalRealClock(t *testing.T) {
	// One real-time fire, to prove the wall clock path works end to end.
	firetest.Drain()
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, "1s", "firetest_record"))
	ls, err := listeners(h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ls[0].Serve(ctx)
	if trig := firetest.Next(t, 3*time.Second); trig["tick"] != json.Number("1") {
		t.Fatalf("trigger %v", trig)
	}
}
