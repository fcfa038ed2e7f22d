package event

import (
	"context"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/runtime"
)

// TestEventPrincipalCannotBeSpoofed: the run an event starts carries the
// emitting run's trigger.principal (an authenticated HTTP caller), and a
// "principal" inside the event payload, often copied from a request body,
// is dropped rather than trusted.
func TestEventPrincipalCannotBeSpoofed(t *testing.T) {
	h, buf, stop := serving(t)
	defer stop()
	spoof := map[string]any{"kind": "bearer", "name": "ops"}
	// An HTTP run authenticated as hmac:github whose body carries a forged principal.
	trig := runtime.MakeTrigger("http", map[string]any{
		"result":    map[string]any{"id": "1", "principal": spoof},
		"principal": map[string]any{"kind": "hmac", "name": "github"},
	})
	rep := h.Fire(context.Background(), runtime.RunOptions{Start: "main", Trigger: trig})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	got := firetest.Next(t, 5*time.Second)
	pr, _ := got["principal"].(map[string]any)
	if pr["kind"] != "hmac" || pr["name"] != "github" || got["id"] != "1" {
		t.Fatalf("event run trigger %v: want the emitting run's principal hmac/github", got)
	}

	buf.WaitFor(t, "msg=event.completed") // the trigger is free again

	// A run without a principal passes none on, whatever the payload says.
	rep = fireRun(h, "main", map[string]any{"result": map[string]any{"id": "2", "principal": spoof}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	got = firetest.Next(t, 5*time.Second)
	if _, ok := got["principal"]; ok || got["id"] != "2" {
		t.Fatalf("event run trigger %v: a payload principal must be dropped", got)
	}
}
