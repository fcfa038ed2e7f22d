package fire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
)

const blockWF = `
name = "g"
[[nodes]]
id = "b"
type = "firetest_block"
`

func TestGateOneRunAtATime(t *testing.T) {
	firetest.Drain()
	h, buf := firetest.Host(t, blockWF)
	g := &fire.Gate{Host: h, Prefix: "test", Name: "t"}
	if !g.Fire(context.Background(), map[string]any{"tick": g.NextTick()}) {
		t.Fatal("first fire skipped")
	}
	if g.Fire(context.Background(), map[string]any{"tick": g.NextTick()}) {
		t.Fatal("second fire started while busy")
	}
	if !strings.Contains(buf.String(), "msg=test.skipped trigger=t start_node=\"\" tick=2") {
		t.Fatalf("audit:\n%s", buf)
	}
	firetest.Release <- struct{}{}
	g.Wait()
	if g.Busy() {
		t.Fatal("still busy after Wait")
	}
	if !g.Fire(context.Background(), map[string]any{"tick": g.NextTick()}) {
		t.Fatal("fire after completion skipped")
	}
	firetest.Release <- struct{}{}
	g.Wait()
	if n := strings.Count(buf.String(), "msg=test.completed"); n != 2 {
		t.Fatalf("%d completions:\n%s", n, buf)
	}
}

func TestGateDrainTimeoutCancelsRun(t *testing.T) {
	firetest.Drain()
	h, buf := firetest.Host(t, blockWF)
	h.DrainTimeout = 100 * time.Millisecond
	g := &fire.Gate{Host: h, Prefix: "test", Name: "t"}
	ctx, cancel := context.WithCancel(context.Background())
	g.Fire(ctx, map[string]any{"tick": 1})
	cancel() // the listener's ctx ending does not kill the run...
	start := time.Now()
	g.Wait() // ...but the drain timeout does.
	if took := time.Since(start); took < 80*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Wait took %v", took)
	}
	// No fixed sleep: the drain timeout is audited only when the run was
	// still in flight, and the run ends after it, not with the listener.
	log := buf.String()
	drained := strings.Index(log, "msg=test.drain_timeout")
	ended := max(strings.Index(log, "msg=test.completed"), strings.Index(log, "msg=test.error"))
	if drained < 0 || ended < drained {
		t.Fatalf("the run did not outlive the listener context until the drain timeout:\n%s", log)
	}
}

func TestFakeClock(t *testing.T) {
	c := fire.NewFakeClock(time.Unix(100, 0))
	a := c.After(10 * time.Second)
	b := c.After(20 * time.Second)
	c.Advance(10 * time.Second)
	select {
	case got := <-a:
		if !got.Equal(time.Unix(110, 0)) {
			t.Fatalf("a fired at %v", got)
		}
	default:
		t.Fatal("a did not fire")
	}
	select {
	case <-b:
		t.Fatal("b fired early")
	default:
	}
	c.Set(time.Unix(120, 0))
	<-b
}
