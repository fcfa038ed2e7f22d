package http

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestDrainFinishesInFlightRuns(t *testing.T) {
	g := resetGate()
	ts := start(t, wf("block", ""), setup{cfg: Config{DrainTimeout: 20 * time.Second}})
	const n = 6
	before := runCount.Load()
	results := make(chan resp, n)
	for i := 0; i < n; i++ {
		go func() { results <- ts.try("POST", "/hook", `{}`) }()
	}
	waitFor(t, func() bool { return strings.Count(ts.Audit.String(), "workflow.started") == n })

	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop(t) }()
	waitFor(t, func() bool { return strings.Contains(ts.Audit.String(), "http.draining") })
	// No longer accepting: new connections are refused.
	waitFor(t, func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.URL, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-stopped:
		t.Fatalf("server stopped with runs in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(g)
	for i := 0; i < n; i++ {
		r := <-results
		r.expect(t, 200)
		if r.at("final_value.released") != true {
			t.Fatalf("run not completed: %s", r.body)
		}
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if got := runCount.Load() - before; got != n {
		t.Fatalf("%d runs completed, want %d", got, n)
	}
}

func TestDrainTimeoutCancelsRuns(t *testing.T) {
	resetGate() // never released
	ts := start(t, wf("block", `idempotency_key = "trigger.id"`), setup{cfg: Config{DrainTimeout: 300 * time.Millisecond}})
	result := make(chan resp, 1)
	go func() { result <- ts.try("POST", "/hook", `{"id":"k"}`) }()
	waitFor(t, func() bool { return strings.Contains(ts.Audit.String(), "workflow.started") })
	begin := time.Now()
	if err := ts.stop(t); err != nil {
		t.Fatalf("Serve returned %v", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("drain took %v with a 300ms timeout", d)
	}
	r := <-result
	r.expect(t, 503)
	if !strings.Contains(ts.Audit.String(), "http.drain_timeout") {
		t.Fatal("no drain_timeout audit event")
	}
	// The cut run released its idempotency claim: the key stays retryable.
	if files := idemFiles(t, ts); len(files) != 0 {
		t.Fatalf("claim left behind: %v", files)
	}
}
