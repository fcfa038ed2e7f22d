package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
)

// dotResources are spellings of a resource outside the allowlisted
// directory that the patterns below match as written.
var dotResources = []string{
	"demo://resource/static/document/../../secret",
	"demo://resource/static/document/a/../../../secret",
	"demo://resource/static/document/%2e%2e/%2e%2e/secret",
	"demo://resource/static/document/%2E%2E/%2E%2E/secret",
	"demo://resource/static/document/%2e%2E/secret",
	"demo://resource/static/document/..%2f..%2fsecret",
}

// dotTools are tool names with dot segments that allow_tools = ["*"]
// matches.
var dotTools = []string{"../echo", "%2e%2e/echo", "%2E%2E/echo", "tools/../echo", "./echo"}

// dotSessionNames become session resources demo://resource/session/NAME
// on the reference server, which lists them to a wildcard trigger.
var dotSessionNames = []string{"../x", "%2e%2e/x", "%2E%2E/x", "a/../../x"}

// TestEverythingDotSegments drives the official reference server through
// a tap that records every byte kiln writes to it: resource reads,
// subscriptions (direct and through a wildcard trigger) and tool calls
// whose target has a dot segment are refused before anything reaches the
// server, while the same requests without one do reach it.
func TestEverythingDotSegments(t *testing.T) {
	node, script := everythingScript(t)
	tap := filepath.Join(t.TempDir(), "to-server.jsonl")
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", `tee -a "$0" | exec "$1" "$2" stdio`, tap, node, script})
	src := fmt.Sprintf(`
name = "mcp-dot-segments"

[[start_nodes]]
name = "read"
source = "manual"
entry_node = "read"

[[start_nodes]]
name = "tool"
source = "manual"
entry_node = "tool"

[[start_nodes]]
name = "on_update"
source = "event"
entry_node = "seen"

[[mcp_servers]]
name = "everything"
command = %s
allow_tools = ["*"]
allow_resources = ["demo://resource/static/document/*", "demo://resource/session/*"]

[policy.mcp]
tools = ["*"]
resources = ["demo://resource/static/document/*", "demo://resource/session/*"]

[[triggers]]
type = "mcp.resource.updated"
server = "everything"
resource = "demo://resource/session/*"
start_node = "on_update"

[[nodes]]
id = "read"
type = "read_mcp_resource"
resource_from = "trigger.uri"

[[nodes]]
id = "tool"
type = "call_mcp_tool"
tool = "../echo"

[[nodes]]
id = "seen"
type = "firetest_record"
`, cmd)
	h := mustHost(t, src, "", func(h *runtime.Host) { h.ServeMode = true })
	pool := h.pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sent := func() string {
		b, err := os.ReadFile(tap)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// reached reports whether a request for target went to the server.
	reached := func(method, target string) bool {
		for _, line := range strings.Split(sent(), "\n") {
			if strings.Contains(line, `"method":"`+method+`"`) && strings.Contains(line, `"`+target+`"`) {
				return true
			}
		}
		return false
	}
	denied := func(err error, what string) bool {
		var d *policy.Denial
		return errors.As(err, &d) && d.What == what && strings.Contains(d.Reason, "segment")
	}

	t.Run("read_mcp_resource", func(t *testing.T) {
		const ok = "demo://resource/static/document/features.md"
		if rep := h.run(t, "read", map[string]any{"uri": ok}); rep.Outcome.Status != runtime.StatusCompleted || !reached("resources/read", ok) {
			t.Fatalf("control read: %+v", rep.Outcome)
		}
		for _, uri := range dotResources {
			if !policy.Match("demo://resource/static/document/*", uri) {
				t.Fatalf("%s does not match the allowlist: the case proves nothing", uri)
			}
			rep := h.run(t, "read", map[string]any{"uri": uri})
			if o := rep.Outcome; o.Status != runtime.StatusErrored || o.Err == nil || o.Err.Class != runtime.ClassPolicy || !strings.Contains(o.Reason, "segment") {
				t.Errorf("node read of %s: %+v", uri, o)
			}
			// The pool checks the server's allowlist on its own too.
			if _, err := pool.ReadResource(ctx, "everything", uri); !denied(err, "mcp.resource") {
				t.Errorf("pool read of %s: %v", uri, err)
			}
			if reached("resources/read", uri) {
				t.Errorf("resources/read %s reached the server", uri)
			}
		}
	})

	t.Run("call_mcp_tool", func(t *testing.T) {
		if _, err := pool.CallTool(ctx, "everything", "echo", map[string]any{"message": "control"}); err != nil || !reached("tools/call", "echo") {
			t.Fatalf("control call: %v", err)
		}
		rep := h.run(t, "tool", nil)
		if o := rep.Outcome; o.Status != runtime.StatusErrored || o.Err == nil || o.Err.Class != runtime.ClassPolicy || !strings.Contains(o.Reason, "segment") {
			t.Errorf("node call of ../echo: %+v", o)
		}
		for _, tool := range dotTools {
			if _, err := pool.CallTool(ctx, "everything", tool, nil); !denied(err, "mcp.tool") {
				t.Errorf("pool call of %s: %v", tool, err)
			}
			if reached("tools/call", tool) {
				t.Errorf("tools/call %s reached the server", tool)
			}
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		for _, uri := range dotResources {
			if err := pool.Subscribe(ctx, "everything", uri); !denied(err, "mcp.resource") {
				t.Errorf("subscribe %s: %v", uri, err)
			}
			if reached("resources/subscribe", uri) {
				t.Errorf("resources/subscribe %s reached the server", uri)
			}
		}
		// The server lists session resources with dot segments; the
		// wildcard trigger subscribes to the clean one only.
		for _, name := range append([]string{"clean.txt.gz"}, dotSessionNames...) {
			_, err := pool.CallTool(ctx, "everything", "gzip-file-as-resource", map[string]any{
				"name": name, "data": "data:text/plain;base64,aGVsbG8gZnJvbSBraWxu"})
			if err != nil {
				t.Fatalf("gzip-file-as-resource %s: %v", name, err)
			}
		}
		listed, err := pool.ListResources(ctx, "everything")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range dotSessionNames {
			if uri := "demo://resource/session/" + name; !slices.Contains(listed, uri) {
				t.Fatalf("the server does not list %s (listed %v): the case proves nothing", uri, listed)
			}
		}
		ls, err := kmcp.Listeners(h.Host)
		if err != nil || len(ls) != 1 {
			t.Fatalf("listeners %v %v", ls, err)
		}
		lctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ls[0].Serve(lctx) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				t.Errorf("listener: %v", err)
			}
		}()
		h.audit.WaitFor(t, "mcp.trigger.started")
		if !reached("resources/subscribe", "demo://resource/session/clean.txt.gz") {
			t.Fatalf("the clean session resource was not subscribed:\n%s", h.audit.String())
		}
		for _, name := range dotSessionNames {
			uri := "demo://resource/session/" + name
			if reached("resources/subscribe", uri) {
				t.Errorf("resources/subscribe %s reached the server", uri)
			}
			if !strings.Contains(h.audit.String(), uri) {
				t.Errorf("no mcp.trigger.denied for %s:\n%s", uri, h.audit.String())
			}
		}
		if n := strings.Count(h.audit.String(), "mcp.trigger.denied"); n != len(dotSessionNames) {
			t.Errorf("%d mcp.trigger.denied events, want %d:\n%s", n, len(dotSessionNames), h.audit.String())
		}
	})
}

// TestTriggerResourceDotSegmentInvalid: a trigger naming a resource with a
// dot segment fails validation, naming the trigger.
func TestTriggerResourceDotSegmentInvalid(t *testing.T) {
	src := triggerWorkflow(httpDocsServer("http://127.0.0.1:1/mcp"), kmcp.TriggerUpdated,
		"test://docs/%2e%2e/private/key", "firetest_record")
	_, err := newHost(t, src)
	if err == nil || !strings.Contains(err.Error(), "triggers[0] (mcp.resource.updated): resource: mcp.resource denied on test://docs/%2e%2e/private/key: contains a '..' segment") {
		t.Fatalf("compile: %v", err)
	}
}
