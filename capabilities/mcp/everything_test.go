package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// everythingScript finds the official reference server that `make tools`
// installs into .cache/npm at the repository root. The interop tests are
// skipped, visibly, only when node or the package is missing, and fail
// instead when CI=true.
func everythingScript(t *testing.T) (node, script string) {
	t.Helper()
	node = testtool.Command(t, "node")
	script = filepath.Join(testtool.RepoRoot(t), ".cache", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		testtool.Missing(t, "interop with @modelcontextprotocol/server-everything: %s is not installed (run `make tools`)", script)
	}
	return node, script
}

// everythingWorkflow runs echo then a resource read on the reference
// server, and has an updated and a created trigger on it.
func everythingWorkflow(node, script string) string {
	cmd, _ := json.Marshal([]string{node, script, "stdio"})
	return fmt.Sprintf(`
name = "everything-interop"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "echo"

[[start_nodes]]
name = "on_update"
source = "event"
entry_node = "page"

[[start_nodes]]
name = "on_create"
source = "event"
entry_node = "page"

[[mcp_servers]]
name = "everything"
command = %s
allow_tools = ["echo", "get-env", "toggle-subscriber-updates", "gzip-file-as-resource"]
allow_resources = ["demo://resource/static/document/*", "demo://resource/dynamic/text/*", "demo://resource/session/*"]
env = { KILN_INTEROP = "INTEROP_SECRET" }

[policy.mcp]
tools = ["echo", "get-env", "toggle-subscriber-updates", "gzip-file-as-resource"]
resources = ["demo://resource/*"]

[[triggers]]
type = "mcp.resource.updated"
server = "everything"
resource = "demo://resource/dynamic/text/1"
start_node = "on_update"

[[triggers]]
type = "mcp.resource.created"
server = "everything"
resource = "demo://resource/session/*"
start_node = "on_create"

[[nodes]]
id = "echo"
type = "call_mcp_tool"
tool = "echo"
args_from = "trigger.args"

[[nodes]]
id = "doc"
type = "read_mcp_resource"
resource_from = "trigger.doc"

[[nodes]]
id = "page"
type = "read_mcp_resource"
resource_from = "trigger.uri"

[[nodes]]
id = "seen"
type = "firetest_record"

[[edges]]
from = "echo"
to = "doc"

[[edges]]
from = "page"
to = "seen"
`, cmd)
}

// TestEverythingInterop drives the official reference server: a workflow
// calls its echo tool and reads a static document; the server's
// environment holds only PATH and the declared var; in serve mode a
// resource update and a resource creation each start a run.
func TestEverythingInterop(t *testing.T) {
	node, script := everythingScript(t)
	t.Setenv("KILN_LEAK_CANARY", "must-not-leak")
	src := everythingWorkflow(node, script)
	firetest.Drain()
	h := mustHost(t, src, "", func(h *runtime.Host) {
		h.ServeMode = true
		h.Engine.Services.Secret = func(name string) (string, error) {
			if name == "INTEROP_SECRET" {
				return "interop-value-71d2", nil
			}
			return "", fmt.Errorf("unknown secret")
		}
	})
	pool := h.pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("workflow calls echo and reads a resource", func(t *testing.T) {
		rep := h.run(t, "main", map[string]any{
			"args": map[string]any{"message": "hello from kiln"},
			"doc":  "demo://resource/static/document/features.md",
		})
		if rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("outcome %+v", rep.Outcome)
		}
		echo := output(t, rep, "echo")
		if echo["server"] != "everything" || echo["is_error"] != false || !strings.Contains(jsonText(echo["content"]), "Echo: hello from kiln") {
			t.Fatalf("echo output %s", jsonText(echo))
		}
		doc := output(t, rep, "doc")
		contents, _ := doc["contents"].([]any)
		if len(contents) != 1 {
			t.Fatalf("doc output %s", jsonText(doc))
		}
		first := contents[0].(map[string]any)
		if first["uri"] != "demo://resource/static/document/features.md" || !strings.Contains(fmt.Sprint(first["text"]), "# Everything Server - Features") {
			t.Fatalf("document contents %.300s", jsonText(first))
		}
	})

	t.Run("server environment is PATH plus declared vars", func(t *testing.T) {
		res, err := pool.CallTool(ctx, "everything", "get-env", nil)
		if err != nil {
			t.Fatal(err)
		}
		text := res["content"].([]any)[0].(map[string]any)["text"].(string)
		var env map[string]string
		if err := json.Unmarshal([]byte(text), &env); err != nil {
			t.Fatalf("get-env answered %q: %v", text, err)
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != "KILN_INTEROP,PATH" || env["KILN_INTEROP"] != "interop-value-71d2" {
			t.Fatalf("reference server environment has %v", keys)
		}
	})

	t.Run("serve mode: an update and a creation each start a run", func(t *testing.T) {
		ls, err := kmcp.Listeners(h.Host)
		if err != nil || len(ls) != 2 {
			t.Fatalf("listeners %v %v", ls, err)
		}
		lctx, stop := context.WithCancel(ctx)
		done := make(chan error, len(ls))
		for _, l := range ls {
			go func() { done <- l.Serve(lctx) }()
		}
		defer func() {
			stop()
			for range ls {
				if err := <-done; err != nil {
					t.Errorf("listener: %v", err)
				}
			}
		}()
		eventually(t, 10*time.Second, "both triggers started", func() bool {
			return strings.Count(h.audit.String(), "mcp.trigger.started") == 2
		})

		// The reference server sends updates for subscribed resources once
		// its toggle-subscriber-updates tool is on (at once, then every 5 s).
		if _, err := pool.CallTool(ctx, "everything", "toggle-subscriber-updates", nil); err != nil {
			t.Fatal(err)
		}
		checkEverything(t, firetest.Next(t, 10*time.Second), kmcp.TriggerUpdated, "demo://resource/dynamic/text/1")
		if _, err := pool.CallTool(ctx, "everything", "toggle-subscriber-updates", nil); err != nil {
			t.Fatal(err)
		}
		h.audit.WaitFor(t, "mcp.trigger.completed")

		// gzip-file-as-resource registers a session resource, which makes
		// the server announce a changed resource list.
		firetest.Drain()
		_, err = pool.CallTool(ctx, "everything", "gzip-file-as-resource", map[string]any{
			"name": "kiln.txt.gz", "data": "data:text/plain;base64,aGVsbG8gZnJvbSBraWxu",
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for {
			select {
			case trig := <-firetest.Fired:
				if trig["type"] == kmcp.TriggerCreated {
					checkEverything(t, trig, kmcp.TriggerCreated, "demo://resource/session/kiln.txt.gz")
					return
				}
			case <-deadline:
				t.Fatalf("no created run:\n%s", h.audit.String())
			}
		}
	})

	if strings.Contains(h.audit.String(), "interop-value-71d2") {
		t.Fatal("the secret reached the audit log")
	}
}

func checkEverything(t *testing.T, trig map[string]any, typ, uri string) {
	t.Helper()
	want := map[string]any{"kind": "event", "type": typ, "server": "everything", "uri": uri, "resource_uri": uri}
	if jsonText(trig) != jsonText(want) {
		t.Fatalf("trigger %s, want %s", jsonText(trig), jsonText(want))
	}
}

// TestEverythingStreamableHTTP: the same reference server over streamable
// HTTP. Tool calls work, and resource updates reach the trigger through
// the legacy GET stream the pool pins (see dialHTTP).
func TestEverythingStreamableHTTP(t *testing.T) {
	addr := startEverythingHTTP(t)

	src := fmt.Sprintf(`
name = "everything-http"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "echo"

[[start_nodes]]
name = "on_update"
source = "event"
entry_node = "seen"

[[mcp_servers]]
name = "everything"
url = "http://%s/mcp"
allow_tools = ["echo", "toggle-subscriber-updates"]
allow_resources = ["demo://resource/dynamic/text/*"]

[[triggers]]
type = "mcp.resource.updated"
server = "everything"
resource = "demo://resource/dynamic/text/2"
start_node = "on_update"

[[nodes]]
id = "echo"
type = "call_mcp_tool"
tool = "echo"
args_from = "trigger.args"

[[nodes]]
id = "seen"
type = "firetest_record"
`, addr)
	h := serve(t, src)
	rep := h.run(t, "main", map[string]any{"args": map[string]any{"message": "over http"}})
	if rep.Outcome.Status != runtime.StatusCompleted || !strings.Contains(jsonText(output(t, rep, "echo")["content"]), "Echo: over http") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if _, err := h.pool(t).CallTool(ctxT(t), "everything", "toggle-subscriber-updates", nil); err != nil {
		t.Fatal(err)
	}
	checkEverything(t, firetest.Next(t, 10*time.Second), kmcp.TriggerUpdated, "demo://resource/dynamic/text/2")
}

// startEverythingHTTP starts the reference server over streamable HTTP on
// a loopback port and returns its address once it listens; the process
// is killed at the end of the test.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	node, script := everythingScript(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), fmt.Sprintf("PORT=%d", port)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 15*time.Second, "the reference server to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}
