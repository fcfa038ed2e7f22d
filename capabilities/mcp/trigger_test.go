package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/runtime"
)

// triggerWorkflow: a trigger of type typ on server "docs" whose run reads
// the notified resource and then runs node kind last (firetest_record or
// firetest_block).
func triggerWorkflow(server, typ, resource, last string) string {
	return fmt.Sprintf(`
name = "mcp-trigger"

[[start_nodes]]
name = "on_change"
source = "event"
entry_node = "page"

%s

[[triggers]]
type = %q
server = "docs"
resource = %q
start_node = "on_change"

[[nodes]]
id = "page"
type = "read_mcp_resource"
resource_from = "trigger.uri"

[[nodes]]
id = "seen"
type = %q

[[edges]]
from = "page"
to = "seen"
`, server, typ, resource, last)
}

// serve sets up a serve-mode host and runs its only listener until the
// test ends; it returns once the trigger has subscribed.
func serve(t *testing.T, src string) *testHost {
	t.Helper()
	firetest.Drain()
	h := mustHost(t, src, "", func(h *runtime.Host) { h.ServeMode = true })
	ls, err := kmcp.Listeners(h.Host)
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners %v %v", ls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls[0].Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		firetest.Drain()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("listener: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("listener did not stop")
		}
	})
	h.audit.WaitFor(t, "mcp.trigger.started")
	if ready, why := h.Host.Ready(); !ready { // the subscription holds: /readyz says so
		t.Fatalf("not ready after mcp.trigger.started: %v", why)
	}
	return h
}

func checkTrigger(t *testing.T, trig map[string]any, typ, uri string) {
	t.Helper()
	want := map[string]any{"kind": "event", "type": typ, "server": "docs", "uri": uri, "resource_uri": uri}
	if jsonText(trig) != jsonText(want) {
		t.Fatalf("trigger %s, want %s", jsonText(trig), jsonText(want))
	}
}

func httpDocsServer(url string) string {
	return fmt.Sprintf(`[[mcp_servers]]
name = "docs"
url = %q
allow_tools = ["touch", "create", "crash"]
allow_resources = ["test://docs/*"]`, url)
}

func TestUpdatedTriggerOverHTTP(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s, url := httpServer(t, rec)
	h := serve(t, triggerWorkflow(httpDocsServer(url), kmcp.TriggerUpdated, "*", "firetest_record"))

	// Only the resources both allowlists admit were subscribed to.
	var subs []string
	for _, r := range recordsOf(readRecords(t, rec), "subscribe") {
		subs = append(subs, r.URI)
	}
	if strings.Join(subs, ",") != "test://docs/a,test://docs/b" {
		t.Fatalf("subscribed to %v", subs)
	}
	if !strings.Contains(h.audit.String(), "mcp.trigger.denied") {
		t.Fatalf("the refused subscription to test://private/key was not audited:\n%s", h.audit.String())
	}

	// A burst of updates for one resource is debounced into one run.
	for i := 0; i < 5; i++ {
		s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
	}
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerUpdated, "test://docs/a")
	firetest.None(t, 2*kmcp.Debounce+200*time.Millisecond)
	h.audit.WaitFor(t, "mcp.trigger.completed")
	if !strings.Contains(h.audit.String(), "mcp.trigger.fire") {
		t.Fatalf("fire not audited")
	}

	// A notification for a resource outside the allowlist starts nothing.
	// Instead of waiting a fixed time, an allowed update sent after it is
	// the fence: had the refused one been let through, its burst would have
	// settled no later than the fence's and been fired or skipped (audited)
	// before the fence's run completes.
	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://private/key"})
	h.audit.WaitFor(t, "mcp.trigger.ignored")
	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/b"})
	eventually(t, 5*time.Second, "the run for test://docs/b completed", func() bool {
		return strings.Count(h.audit.String(), "mcp.trigger.completed") == 2
	})
	for _, line := range strings.Split(h.audit.String(), "\n") {
		if strings.Contains(line, "uri=test://private/key") && (strings.Contains(line, "msg=mcp.trigger.fire") || strings.Contains(line, "msg=mcp.trigger.skipped")) {
			t.Fatalf("the refused resource reached the trigger: %s", line)
		}
	}
	checkTrigger(t, firetest.Next(t, time.Second), kmcp.TriggerUpdated, "test://docs/b")

	// A resource that appears later is subscribed to after list_changed.
	addDoc(s, "test://docs/c")
	eventually(t, 5*time.Second, "subscription to test://docs/c", func() bool {
		for _, r := range recordsOf(readRecords(t, rec), "subscribe") {
			if r.URI == "test://docs/c" {
				return true
			}
		}
		return false
	})
	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/c"})
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerUpdated, "test://docs/c")
}

// TestOneRunAtATime: an update while the trigger's run is in flight is
// skipped and audited, not queued.
func TestOneRunAtATime(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s, url := httpServer(t, rec)
	h := serve(t, triggerWorkflow(httpDocsServer(url), kmcp.TriggerUpdated, "test://docs/*", "firetest_block"))

	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
	h.audit.WaitFor(t, "mcp.trigger.fire")
	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/b"})
	h.audit.WaitFor(t, "mcp.trigger.skipped")
	if !strings.Contains(h.audit.String(), "uri=test://docs/b") {
		t.Fatalf("skip does not name the resource:\n%s", h.audit.String())
	}
	firetest.Release <- struct{}{}
	h.audit.WaitFor(t, "mcp.trigger.completed")
	if n := strings.Count(h.audit.String(), "mcp.trigger.fire"); n != 1 {
		t.Fatalf("%d fires, want 1", n)
	}
}

func TestCreatedTriggerOverHTTP(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s, url := httpServer(t, rec)
	h := serve(t, triggerWorkflow(httpDocsServer(url), kmcp.TriggerCreated, "*", "firetest_record"))

	// Existing resources are the baseline: nothing fires for them.
	firetest.None(t, 2*kmcp.Debounce)
	addDoc(s, "test://private/new") // matches "*" but not allow_resources
	addDoc(s, "test://docs/new")
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerCreated, "test://docs/new")
	firetest.None(t, 2*kmcp.Debounce+200*time.Millisecond)
	h.audit.WaitFor(t, "mcp.trigger.completed")
	if !strings.Contains(h.audit.String(), "uri=test://private/new") {
		t.Fatalf("denied creation not audited:\n%s", h.audit.String())
	}
}

// TestTriggerSurvivesServerRestart: a watched stdio server that dies is
// restarted at once and its subscriptions renewed, so updates keep firing.
func TestTriggerSurvivesServerRestart(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	docs := fmt.Sprintf(`[[mcp_servers]]
name = "docs"
command = %s
allow_tools = ["touch", "crash"]
allow_resources = ["test://docs/*"]`, stdioCommand(t, rec))
	h := serve(t, triggerWorkflow(docs, kmcp.TriggerUpdated, "test://docs/a", "firetest_record"))
	pool := h.pool(t)
	ctx := ctxT(t)

	if _, err := pool.CallTool(ctx, "docs", "touch", map[string]any{"uri": "test://docs/a"}); err != nil {
		t.Fatal(err)
	}
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerUpdated, "test://docs/a")

	first := pool.PID("docs")
	_, _ = pool.CallTool(ctx, "docs", "crash", nil)
	h.audit.WaitFor(t, "mcp.trigger.reconnected")
	eventually(t, 5*time.Second, "second subscribe", func() bool {
		return len(recordsOf(readRecords(t, rec), "subscribe")) == 2
	})
	if pid := pool.PID("docs"); pid == first || pid == 0 {
		t.Fatalf("pid %d, first %d", pid, first)
	}
	if _, err := pool.CallTool(ctx, "docs", "touch", map[string]any{"uri": "test://docs/a"}); err != nil {
		t.Fatal(err)
	}
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerUpdated, "test://docs/a")

	// The metrics saw the restart and the server is up again; the
	// trigger's fires are counted.
	var b bytes.Buffer
	if err := metrics.Of(h.Host).Write(&b); err != nil {
		t.Fatal(err)
	}
	m, _ := opstest.Parse(t, b.String())
	for k, want := range map[string]float64{
		`kiln_mcp_server_up{server="docs",workflow="mcp-trigger"}`:                                              1,
		`kiln_mcp_server_restarts_total{server="docs",workflow="mcp-trigger"}`:                                  1,
		`kiln_trigger_fires_total{trigger="mcp.resource.updated[0] docs test://docs/a",workflow="mcp-trigger"}`: 2,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", k, got, ok, want, b.String())
		}
	}
}

// TestTriggerNeedsServerSupport: a server that cannot subscribe (or does
// not announce list changes) fails the listener at start-up instead of
// silently never firing.
func TestTriggerNeedsServerSupport(t *testing.T) {
	s := server.NewMCPServer("plain", "1", server.WithResourceCapabilities(false, false))
	addDoc(s, "test://docs/a")
	url := httptestServer(t, s)
	for typ, want := range map[string]string{
		kmcp.TriggerUpdated: "does not support resources/subscribe",
		kmcp.TriggerCreated: "does not send resources/list_changed notifications",
	} {
		h := mustHost(t, triggerWorkflow(httpDocsServer(url), typ, "test://docs/a", "firetest_record"), "")
		ls, err := kmcp.Listeners(h.Host)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = ls[0].Serve(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), typ+"[0] docs") {
			t.Fatalf("%s: serve error %v", typ, err)
		}
	}
}

func TestListenerNeedsRealPool(t *testing.T) {
	h, err := newHost(t, triggerWorkflow(httpDocsServer("http://127.0.0.1:9/mcp"), kmcp.TriggerUpdated, "test://docs/a", "firetest_record"))
	if err != nil {
		t.Fatal(err)
	}
	mcpclient.SetClient(h.Engine.Services, &mockClient{})
	if _, err := kmcp.Listeners(h.Host); err == nil || !strings.Contains(err.Error(), "no MCP server pool") {
		t.Fatalf("listeners error %v", err)
	}
}

// TestTriggerReconnectsLostHTTPSession: while idle, the keep-alive ping
// notices that the HTTP server forgot the session (it restarted); the pool
// reconnects, renews the subscription, and updates fire again.
func TestTriggerReconnectsLostHTTPSession(t *testing.T) {
	defer func(d time.Duration) { kmcp.KeepAlive = d }(kmcp.KeepAlive)
	kmcp.KeepAlive = 100 * time.Millisecond
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	sw := &switchHandler{h: statefulHTTP(newTestServer(rec))}
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	h := serve(t, triggerWorkflow(httpDocsServer(ts.URL+"/mcp"), kmcp.TriggerUpdated, "test://docs/a", "firetest_record"))

	restarted := newTestServer(rec)
	sw.set(statefulHTTP(restarted))
	h.audit.WaitFor(t, "mcp.trigger.reconnected")
	eventually(t, 5*time.Second, "the subscription renewed on the restarted server", func() bool {
		return len(recordsOf(readRecords(t, rec), "subscribe")) >= 2
	})
	// The new GET stream may open a moment after the subscribe answer.
	deadline := time.Now().Add(5 * time.Second)
	for {
		restarted.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
		select {
		case trig := <-firetest.Fired:
			checkTrigger(t, trig, kmcp.TriggerUpdated, "test://docs/a")
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run after the reconnect:\n%s", h.audit.String())
		}
	}
}

// TestDrainCancelsARunThatOutlivesTheDrainTimeout: on shutdown the
// listener waits for its in-flight run at most DrainTimeout, then cancels
// it and returns.
func TestDrainCancelsARunThatOutlivesTheDrainTimeout(t *testing.T) {
	firetest.Drain()
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s, url := httpServer(t, rec)
	h := mustHost(t, triggerWorkflow(httpDocsServer(url), kmcp.TriggerUpdated, "test://docs/a", "firetest_block"), "",
		func(h *runtime.Host) { h.ServeMode, h.DrainTimeout = true, 200*time.Millisecond })
	ls, err := kmcp.Listeners(h.Host)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls[0].Serve(ctx) }()
	h.audit.WaitFor(t, "mcp.trigger.started")
	s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
	h.audit.WaitFor(t, "mcp.trigger.fire")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the drain timeout")
	}
	if !strings.Contains(h.audit.String(), "mcp.trigger.drain_timeout") {
		t.Fatalf("drain timeout not audited:\n%s", h.audit.String())
	}
}

// TestContinuousUpdatesStillFire: a server that never pauses between
// updates still starts runs, at the latest MaxDelay after the first one.
func TestContinuousUpdatesStillFire(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	s, url := httpServer(t, rec)
	serve(t, triggerWorkflow(httpDocsServer(url), kmcp.TriggerUpdated, "test://docs/a", "firetest_record"))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(kmcp.Debounce / 3):
				s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": "test://docs/a"})
			}
		}
	}()
	begin := time.Now()
	checkTrigger(t, firetest.Next(t, 5*time.Second), kmcp.TriggerUpdated, "test://docs/a")
	if d := time.Since(begin); d > kmcp.MaxDelay+time.Second {
		t.Fatalf("first run after %v", d)
	}
}
