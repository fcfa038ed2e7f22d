package event

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/runtime"
)

const wfTOML = `
name = "events"
[[start_nodes]]
name = "main"
source = "manual"
entry_node = "emit"
[[start_nodes]]
name = "on_done"
source = "event"
entry_node = "rec"
[[start_nodes]]
name = "on_ping"
source = "event"
entry_node = "again"
[[triggers]]
type = "internal.event"
name = "job.done"
start_node = "on_done"
[[triggers]]
type = "internal.event"
name = "ping"
start_node = "on_ping"
[[nodes]]
id = "emit"
type = "emit_event"
event = "job.done"
payload_from = "trigger.result"
[[nodes]]
id = "rec"
type = "firetest_record"
[[nodes]]
id = "again"
type = "emit_event"
event = "ping"
payload_from = "trigger"
[[nodes]]
id = "undeclared"
type = "emit_event"
event = "nobody.listens"
`

func serving(t *testing.T) (*runtime.Host, *firetest.Buffer, func()) {
	t.Helper()
	firetest.Drain()
	h, buf := firetest.Host(t, wfTOML)
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	ls, err := listeners(h)
	if err != nil || len(ls) != 2 {
		t.Fatalf("listeners %v %v", ls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(ls))
	for _, l := range ls {
		go func() { l.Serve(ctx); done <- struct{}{} }()
	}
	// Wait until both listeners are subscribed.
	b := install(h)
	for deadline := time.Now().Add(5 * time.Second); ; {
		b.mu.Lock()
		n := len(b.subs["job.done"]) + len(b.subs["ping"])
		b.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listeners never subscribed")
		}
		time.Sleep(time.Millisecond)
	}
	return h, buf, func() {
		cancel()
		for range ls {
			<-done
		}
	}
}

func fireRun(h *runtime.Host, start string, payload any) *runtime.Report {
	return h.Fire(context.Background(), runtime.RunOptions{Start: start, Trigger: runtime.MakeTrigger("manual", payload)})
}

func TestEmitStartsTriggeredRun(t *testing.T) {
	h, buf, stop := serving(t)
	defer stop()
	rep := fireRun(h, "main", map[string]any{"result": map[string]any{"id": "42", "type": "spoof"}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if b, _ := runtime.EncodeJSON(rep.Outcome.FinalValue); string(b) != `{"delivered":true,"event":"job.done"}` {
		t.Fatalf("emit output %s", b)
	}
	trig := firetest.Next(t, 5*time.Second)
	if trig["kind"] != "event" || trig["type"] != "internal.event" || trig["event"] != "job.done" ||
		trig["id"] != "42" || trig["hops"] != json.Number("1") || trig["tick"] != json.Number("1") {
		t.Fatalf("trigger %v", trig)
	}
	buf.WaitFor(t, "msg=event.completed")
	if !strings.Contains(buf.String(), "msg=event.fire trigger=\"internal.event[0] job.done\"") {
		t.Fatalf("audit:\n%s", buf)
	}
}

func TestSelfEmitWhileBusyIsSkipped(t *testing.T) {
	h, buf, stop := serving(t)
	defer stop()
	// main -> (emit job.done) is unrelated; start the ping chain directly:
	// the ping-triggered run emits ping while its own trigger is busy.
	b := install(h)
	if err := b.emit(context.Background(), "ping", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	buf.WaitFor(t, "msg=event.skipped")
	buf.WaitFor(t, "msg=event.completed")
	if n := strings.Count(buf.String(), "msg=event.fire"); n != 1 {
		t.Fatalf("%d fires:\n%s", n, buf)
	}
}

func TestOneShotEmitIsDroppedVisibly(t *testing.T) {
	firetest.Drain()
	h, buf := firetest.Host(t, wfTOML)
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	rep := fireRun(h, "main", map[string]any{"result": "x"})
	out, _ := runtime.EncodeJSON(rep.Outcome.FinalValue)
	if rep.Outcome.Status != runtime.StatusCompleted || !strings.Contains(string(out), `"delivered":false`) {
		t.Fatalf("outcome %+v %s", rep.Outcome, out)
	}
	if !strings.Contains(buf.String(), "msg=event.dropped") {
		t.Fatalf("drop not audited:\n%s", buf)
	}
	firetest.None(t, 50*time.Millisecond)
}

func TestUndeclaredEventErrors(t *testing.T) {
	h, _, stop := serving(t)
	defer stop()
	rep := h.Fire(context.Background(), runtime.RunOptions{Start: "undeclared"})
	o := rep.Outcome
	if o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "node undeclared (emit_event)") ||
		!strings.Contains(o.Reason, `"nobody.listens"`) {
		t.Fatalf("outcome %+v", o)
	}
}

func TestEventChainBounded(t *testing.T) {
	h, _, stop := serving(t)
	defer stop()
	b := install(h)
	ctx := context.WithValue(context.Background(), hopsKey{}, runtime.MaxCallDepth)
	err := b.emit(ctx, "job.done", nil)
	if err == nil || !strings.Contains(err.Error(), "event chain longer than 8 hops") {
		t.Fatalf("emit: %v", err)
	}
}

func TestDryRunDoesNotEmit(t *testing.T) {
	h, _, stop := serving(t)
	defer stop()
	rep := h.Fire(context.Background(), runtime.RunOptions{Start: "main", DryRun: true})
	out, _ := runtime.EncodeJSON(rep.Outcome.FinalValue)
	if string(out) != `{"dry_run":true,"event":"job.done"}` {
		t.Fatalf("dry run output %s", out)
	}
	firetest.None(t, 50*time.Millisecond)
}

func TestNoEmitServiceIsCapabilityError(t *testing.T) {
	h, _ := firetest.Host(t, wfTOML) // Setup never ran
	rep := fireRun(h, "main", nil)
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "not available") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}
