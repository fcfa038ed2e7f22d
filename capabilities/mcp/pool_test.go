package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestRestartOnceAfterDeath: a server that dies is restarted on next use;
// the tool call that was in flight is not replayed.
func TestRestartOnceAfterDeath(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	pool := h.pool(t)
	if rep := h.run(t, "tool", nil); rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	first := pool.PID("docs")

	_, err := pool.CallTool(ctxT(t), "docs", "crash", nil)
	if err == nil || !strings.Contains(err.Error(), "connection lost during tools/call crash") || !strings.Contains(err.Error(), "not replayed") {
		t.Fatalf("crash error %v", err)
	}
	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "again"}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("after restart: %+v", rep.Outcome)
	}
	if second := pool.PID("docs"); second == 0 || second == first {
		t.Fatalf("pid %d after restart, first was %d", second, first)
	}
	recs := readRecords(t, rec)
	if n := len(recordsOf(recs, "start")); n != 2 {
		t.Fatalf("%d starts, want 2", n)
	}
	crashes := 0
	for _, c := range recordsOf(recs, "call") {
		if c.Tool == "crash" {
			crashes++
		}
	}
	if crashes != 1 {
		t.Fatalf("crash sent %d times; a tool call must not be replayed", crashes)
	}
	if !strings.Contains(h.audit.String(), "mcp.server.exited") {
		t.Fatalf("death not audited:\n%s", h.audit.String())
	}
}

// TestRestartFailureKeepsServerDown: when the restart fails, the server
// stays down with the reason (its stderr) and is not started again.
func TestRestartFailureKeepsServerDown(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec, "once"), "echo", ""), "")
	pool := h.pool(t)
	if rep := h.run(t, "tool", nil); rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if _, err := pool.CallTool(ctxT(t), "docs", "crash", nil); err == nil {
		t.Fatal("crash call succeeded")
	}
	for i := 0; i < 3; i++ {
		rep := h.run(t, "tool", nil)
		if rep.Outcome.Status != runtime.StatusErrored || runtime.ClassOf(rep.Outcome.Err) != runtime.ClassMCP {
			t.Fatalf("run %d: %+v", i, rep.Outcome)
		}
		for _, want := range []string{"restart failed", "refusing to start a second time", "node call (call_mcp_tool)"} {
			if !strings.Contains(rep.Outcome.Reason, want) {
				t.Fatalf("run %d: reason %q lacks %q", i, rep.Outcome.Reason, want)
			}
		}
	}
	if n := len(recordsOf(readRecords(t, rec), "start")); n != 2 {
		t.Fatalf("%d starts, want 2 (first start, one restart)", n)
	}
	if !strings.Contains(h.audit.String(), "mcp.server.failed") {
		t.Fatalf("failure not audited")
	}
	// /readyz turns 503 for a server down for good.
	if ready, why := h.Host.Ready(); ready || len(why) != 1 || !strings.HasPrefix(why[0], "mcp server docs: down for good: ") {
		t.Fatalf("ready %v %v, want not ready because docs is down", ready, why)
	}
	if up := pool.Up(); up["docs"] {
		t.Fatalf("Up() = %v, want docs down", up)
	}
}

func TestConcurrentFirstUseStartsOnce(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rep := h.run(t, "tool", nil); rep.Outcome.Status != runtime.StatusCompleted {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	recs := readRecords(t, rec)
	if failed.Load() != 0 || len(recordsOf(recs, "start")) != 1 || len(recordsOf(recs, "call")) != 8 {
		t.Fatalf("%d failed; records %+v", failed.Load(), recs)
	}
}

func TestCloseStopsServers(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	pool := h.pool(t)
	if err := pool.Start(ctxT(t), "docs"); err != nil {
		t.Fatal(err)
	}
	pid := pool.PID("docs")
	if pid == 0 {
		t.Fatal("no process")
	}
	begin := time.Now()
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("close took %v; a server exits when its stdin closes", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("server process %d still exists after Close (kill 0: %v)", pid, err)
	}
	if _, err := pool.CallTool(ctxT(t), "docs", "echo", nil); !errors.Is(err, kmcp.ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

// switchHandler lets a test replace the MCP server behind one URL, which
// is what a server restart looks like to a client: its session is gone.
type switchHandler struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *switchHandler) set(h http.Handler) { s.mu.Lock(); s.h = h; s.mu.Unlock() }
func (s *switchHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func httpWorkflow(url, tool string) string {
	return fmt.Sprintf(`
name = "mcp-http"

[[start_nodes]]
name = "tool"
source = "manual"
entry_node = "call"

[[start_nodes]]
name = "read"
source = "manual"
entry_node = "page"

[[mcp_servers]]
name = "web"
url = %q
allow_tools = ["echo"]
allow_resources = ["test://docs/**"]

[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = %q
args_from = "trigger.args"

[[nodes]]
id = "page"
type = "read_mcp_resource"
resource_from = "trigger.uri"
`, url, tool)
}

func TestHTTPServerAndLostSession(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	sw := &switchHandler{h: statefulHTTP(newTestServer(rec))}
	ts := httptest.NewServer(sw)
	t.Cleanup(ts.Close)
	src := httpWorkflow(ts.URL+"/mcp", "echo")
	mustValid(t, src)
	h := mustHost(t, src, "")

	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "over http"}})
	if rep.Outcome.Status != runtime.StatusCompleted || !strings.Contains(jsonText(output(t, rep, "call")["content"]), "echo: over http") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	rep = h.run(t, "read", map[string]any{"uri": "test://docs/b"})
	if got := jsonText(output(t, rep, "page")["contents"]); !strings.Contains(got, "content of test://docs/b") {
		t.Fatalf("contents %s", got)
	}

	// The server restarts and forgets the session: the next tool call is
	// refused with 404 before it runs, so it is safe to reconnect and send
	// it again.
	sw.set(statefulHTTP(newTestServer(rec)))
	rep = h.run(t, "tool", map[string]any{"args": map[string]any{"message": "after restart"}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("after server restart: %+v\n%s", rep.Outcome, h.audit.String())
	}
	calls := recordsOf(readRecords(t, rec), "call")
	if len(calls) != 2 || string(calls[1].Args) != `{"message":"after restart"}` {
		t.Fatalf("calls %+v", calls)
	}
	if n := strings.Count(h.audit.String(), "mcp.server.started"); n != 2 {
		t.Fatalf("%d connections, want 2 (one reconnect):\n%s", n, h.audit.String())
	}
}

func TestValidation(t *testing.T) {
	cmd := `["/bin/true"]`
	cases := []struct{ name, src, want string }{
		{"unknown server", fmt.Sprintf(`
name = "v"
[[mcp_servers]]
name = "docs"
command = %s
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
server = "nope"
`, cmd), `node call (call_mcp_tool): server "nope" is not declared in [[mcp_servers]] (declared: docs)`},
		{"ambiguous default", fmt.Sprintf(`
name = "v"
[[mcp_servers]]
name = "a"
command = %[1]s
[[mcp_servers]]
name = "b"
command = %[1]s
[[nodes]]
id = "page"
type = "read_mcp_resource"
resource_from = "trigger.uri"
`, cmd), `node page (read_mcp_resource): ambiguous server: 2 servers are declared (a, b) and none is named "default"; set server`},
		{"named server without declarations", `
name = "v"
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
server = "docs"
`, `server "docs" is not declared in [[mcp_servers]] (none is declared`},
		{"bad allow_tools pattern", fmt.Sprintf(`
name = "v"
[[mcp_servers]]
name = "docs"
command = %s
allow_tools = ["get_*_secret"]
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
`, cmd), `[[mcp_servers]] "docs": allow_tools: pattern "get_*_secret": '*' may only end a pattern`},
		{"bad policy pattern", `
name = "v"
[policy.mcp]
resources = ["docs://**/pages"]
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
`, `[policy.mcp]: resources: pattern "docs://**/pages"`},
		{"env on a url server", `
name = "v"
[[mcp_servers]]
name = "docs"
url = "http://127.0.0.1:9/mcp"
env = { TOKEN = "T" }
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
`, `env applies to stdio servers (command) only`},
		{"empty tool", `
name = "v"
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = " "
`, `node call (call_mcp_tool): tool is required`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newHost(t, tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("compile error %v\nwant it to contain %s", err, tc.want)
			}
		})
	}

	// A "default" server among several is the default.
	if _, err := newHost(t, fmt.Sprintf(`
name = "v"
[[mcp_servers]]
name = "a"
command = %[1]s
[[mcp_servers]]
name = "default"
command = %[1]s
[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
`, cmd)); err != nil {
		t.Fatalf("default among several: %v", err)
	}
}

func TestSetupValidation(t *testing.T) {
	cases := []struct{ name, src, stdio, want string }{
		{"trigger on unknown server (no MCP node)", `
name = "v"
[[start_nodes]]
name = "on_update"
source = "event"
entry_node = "done"
[[mcp_servers]]
name = "docs"
command = ["/bin/true"]
[[triggers]]
type = "mcp.resource.updated"
server = "wiki"
resource = "docs://*"
start_node = "on_update"
[[nodes]]
id = "done"
type = "terminate"
`, "", `triggers[0] (mcp.resource.updated): server "wiki" is not declared`},
		{"flag clashes with a declared default", `
name = "v"
[[mcp_servers]]
name = "default"
command = ["/bin/true"]
[[nodes]]
id = "done"
type = "terminate"
`, "/bin/cat", `--mcp-stdio: [[mcp_servers]] already declares a server named "default"`},
		{"unterminated quote", `
name = "v"
[[nodes]]
id = "done"
type = "terminate"
`, `/bin/server "unterminated`, `--mcp-stdio: unterminated quote`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := newHost(t, tc.src)
			if err != nil {
				t.Fatal(err)
			}
			err = kmcp.Setup(context.Background(), h.Host, tc.stdio)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("setup error %v, want %s", err, tc.want)
			}
		})
	}
}

// TestChildServersConflict: a child declaring a server of the same name
// differently would share the parent's connection: refused.
func TestChildServersConflict(t *testing.T) {
	parent := &workflow.Workflow{Name: "parent",
		MCPServers: []workflow.MCPServer{{Name: "docs", Command: []string{"/bin/a"}}},
		Nodes:      []workflow.Node{{ID: "done", Type: "terminate"}},
		Children: map[string]*workflow.Workflow{"child.toml": {Name: "child",
			MCPServers: []workflow.MCPServer{{Name: "docs", Command: []string{"/bin/b"}}},
			Nodes:      []workflow.Node{{ID: "done", Type: "terminate"}}}},
	}
	p, err := runtime.Compile(parent, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h := &runtime.Host{Engine: &runtime.Engine{Services: &runtime.Services{}}, Program: p}
	err = kmcp.Setup(context.Background(), h, "")
	if err == nil || !strings.Contains(err.Error(), `[[mcp_servers]] "docs" is declared twice with different settings (workflow child)`) {
		t.Fatalf("setup error %v", err)
	}
}

// TestServeModeStartsServersAtStartUp: a server that cannot start fails
// the serve start-up, not the first request.
func TestServeModeStartsServersAtStartUp(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h, err := newHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), func(h *runtime.Host) { h.ServeMode = true })
	if err != nil {
		t.Fatal(err)
	}
	if err := kmcp.Setup(ctxT(t), h.Host, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.pool(t).Close() })
	if len(recordsOf(readRecords(t, rec), "start")) != 1 {
		t.Fatalf("serve mode did not start the server")
	}

	broken, err := newHost(t, nodesWorkflow(`["/nonexistent/kiln-mcp-server"]`, "echo", ""), func(h *runtime.Host) { h.ServeMode = true })
	if err != nil {
		t.Fatal(err)
	}
	err = kmcp.Setup(ctxT(t), broken.Host, "")
	if err == nil || !strings.Contains(err.Error(), "MCP server docs") || !strings.Contains(err.Error(), "/nonexistent/kiln-mcp-server") {
		t.Fatalf("setup error %v", err)
	}
	_ = broken.pool(t).Close()
}

// TestRestartedServerDyingAgainStaysDown: a restarted server that dies
// before answering anything is not restarted a second time (no crash loop).
func TestRestartedServerDyingAgainStaysDown(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	pool := h.pool(t)
	ctx := ctxT(t)
	if rep := h.run(t, "tool", nil); rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	for i := 0; i < 2; i++ { // the healthy server dies, then its restart dies too
		if _, err := pool.CallTool(ctx, "docs", "crash", nil); err == nil {
			t.Fatalf("crash %d succeeded", i)
		}
	}
	rep := h.run(t, "tool", nil)
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "died again before answering after its restart") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if n := len(recordsOf(readRecords(t, rec), "start")); n != 2 {
		t.Fatalf("%d starts, want 2", n)
	}
}
