package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
)

// serverArg makes the test binary an MCP stdio server instead of running
// tests: `mcp.test -kiln-mcp-test-server RECORD [MODE]`.
const serverArg = "-kiln-mcp-test-server"

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == serverArg {
		os.Exit(serveTestServer(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// serveTestServer runs the stdio test server. It appends one JSON line
// per event (start, tool call) to RECORD. MODE "once" refuses to start a
// second time (a server whose restart fails).
func serveTestServer(args []string) int {
	rec := args[0]
	mode := ""
	if len(args) > 1 {
		mode = args[1]
	}
	appendRecord(rec, map[string]any{"event": "start", "pid": os.Getpid()})
	if mode == "once" {
		marker := rec + ".started"
		if _, err := os.Stat(marker); err == nil {
			fmt.Fprintln(os.Stderr, "refusing to start a second time")
			return 1
		}
		_ = os.WriteFile(marker, nil, 0o600)
	}
	if err := server.ServeStdio(newTestServer(rec)); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// newTestServer is the MCP server of the unit tests, served over stdio
// (re-executed test binary) or streamable HTTP (httptest). Every tools/call
// is recorded to rec before it is handled.
func newTestServer(rec string) *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddBeforeSubscribe(func(_ context.Context, _ any, req *mcp.SubscribeRequest) {
		appendRecord(rec, map[string]any{"event": "subscribe", "uri": req.Params.URI})
	})
	s := server.NewMCPServer("kiln-test", "1.0.0",
		server.WithResourceCapabilities(true, true),
		server.WithToolCapabilities(false),
		server.WithHooks(hooks))
	tool := func(t mcp.Tool, h func(ctx context.Context, args map[string]any) (*mcp.CallToolResult, error)) {
		s.AddTool(t, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args, _ := req.Params.Arguments.(map[string]any)
			raw, _ := json.Marshal(req.Params.Arguments)
			appendRecord(rec, map[string]any{"event": "call", "tool": req.Params.Name, "args": json.RawMessage(raw)})
			return h(ctx, args)
		})
	}
	tool(mcp.NewTool("echo", mcp.WithString("message")), func(_ context.Context, args map[string]any) (*mcp.CallToolResult, error) {
		msg, _ := args["message"].(string)
		return mcp.NewToolResultText("echo: " + msg), nil
	})
	tool(mcp.NewTool("structured"), func(context.Context, map[string]any) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultStructured(map[string]any{"temperature": 21.5, "ok": true}, `{"temperature":21.5,"ok":true}`), nil
	})
	tool(mcp.NewTool("fail"), func(context.Context, map[string]any) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("the tool failed on purpose"), nil
	})
	tool(mcp.NewTool("env"), func(context.Context, map[string]any) (*mcp.CallToolResult, error) {
		env := os.Environ()
		sort.Strings(env)
		return mcp.NewToolResultText(strings.Join(env, "\n")), nil
	})
	tool(mcp.NewTool("crash"), func(context.Context, map[string]any) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	tool(mcp.NewTool("touch", mcp.WithString("uri")), func(_ context.Context, args map[string]any) (*mcp.CallToolResult, error) {
		uri, _ := args["uri"].(string)
		s.SendNotificationToAllClients(mcp.MethodNotificationResourceUpdated, map[string]any{"uri": uri})
		return mcp.NewToolResultText("touched " + uri), nil
	})
	tool(mcp.NewTool("create", mcp.WithString("uri")), func(_ context.Context, args map[string]any) (*mcp.CallToolResult, error) {
		uri, _ := args["uri"].(string)
		addDoc(s, uri)
		return mcp.NewToolResultText("created " + uri), nil
	})
	addDoc(s, "test://docs/a")
	addDoc(s, "test://docs/b")
	addDoc(s, "test://private/key")
	return s
}

// addDoc adds a text resource whose content names its URI; adding one to
// a running server sends notifications/resources/list_changed.
func addDoc(s *server.MCPServer, uri string) {
	s.AddResource(mcp.NewResource(uri, filepath.Base(uri), mcp.WithMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "content of " + req.Params.URI}}, nil
		})
}

func appendRecord(path string, v any) {
	b, _ := json.Marshal(v)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

// record is one line of a test server's record file.
type record struct {
	Event string          `json:"event"`
	PID   int             `json:"pid"`
	Tool  string          `json:"tool"`
	URI   string          `json:"uri"`
	Args  json.RawMessage `json:"args"`
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("bad record line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func recordsOf(recs []record, event string) []record {
	var out []record
	for _, r := range recs {
		if r.Event == event {
			out = append(out, r)
		}
	}
	return out
}

// stdioCommand is the TOML array that starts the stdio test server.
func stdioCommand(t *testing.T, rec string, mode ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parts := append([]string{exe, serverArg, rec}, mode...)
	b, _ := json.Marshal(parts)
	return string(b)
}

// httpServer serves a fresh test server over streamable HTTP.
func httpServer(t *testing.T, rec string) (*server.MCPServer, string) {
	t.Helper()
	s := newTestServer(rec)
	return s, httptestServer(t, s)
}

// httptestServer serves s over streamable HTTP on loopback.
func httptestServer(t *testing.T, s *server.MCPServer) string {
	t.Helper()
	ts := httptest.NewServer(statefulHTTP(s))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// testHost decodes, validates and compiles a workflow and runs the mcp
// Setup on a host with a captured audit log. The pool is closed at the
// end of the test.
type testHost struct {
	*runtime.Host
	audit *firetest.Buffer
}

func newHost(t *testing.T, src string, opts ...func(*runtime.Host)) (*testHost, error) {
	t.Helper()
	wf, err := gen.Decode(filepath.Join(t.TempDir(), "workflow.toml"), []byte(src))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		return nil, err
	}
	buf := &firetest.Buffer{}
	e := &runtime.Engine{Audit: slog.New(slog.NewTextHandler(buf, nil)), Services: &runtime.Services{}}
	h := &runtime.Host{Engine: e, Program: p}
	for _, o := range opts {
		o(h)
	}
	return &testHost{Host: h, audit: buf}, nil
}

// mustHost is newHost plus Setup; stdio is the legacy --mcp-stdio value.
func mustHost(t *testing.T, src, stdio string, opts ...func(*runtime.Host)) *testHost {
	t.Helper()
	h, err := newHost(t, src, opts...)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kmcp.Setup(ctx, h.Host, stdio); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if p, ok := mcpclient.ClientFrom(h.Engine.Services).(*kmcp.Pool); ok {
		t.Cleanup(func() { _ = p.Close() })
	}
	return h
}

func (h *testHost) pool(t *testing.T) *kmcp.Pool {
	t.Helper()
	c := mcpclient.ClientFrom(h.Engine.Services)
	p, ok := c.(*kmcp.Pool)
	if !ok {
		t.Fatalf("the MCP client is %T, want *mcp.Pool", c)
	}
	return p
}

// run fires one run with trigger payload and a generous deadline.
func (h *testHost) run(t *testing.T, start string, payload map[string]any) *runtime.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.Fire(ctx, runtime.RunOptions{Start: start, Trigger: runtime.MakeTrigger("manual", payload)})
}

// output returns a node's output from a report's trace.
func output(t *testing.T, rep *runtime.Report, node string) map[string]any {
	t.Helper()
	for _, e := range rep.Trace.Entries {
		if e.NodeID == node {
			m, ok := e.Output.(map[string]any)
			if !ok {
				t.Fatalf("output of %s is %T: %v", node, e.Output, e.Output)
			}
			return m
		}
	}
	t.Fatalf("node %s did not run; trace %v, outcome %+v", node, rep.Trace.Path(), rep.Outcome)
	return nil
}

func jsonText(v any) string {
	b, err := runtime.EncodeJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func kmcpSetup(h *testHost) error { return kmcp.Setup(context.Background(), h.Host, "") }

// statefulHTTP serves s over streamable HTTP with real sessions, like a
// production server: a session the server does not know is answered 404.
func statefulHTTP(s *server.MCPServer) *server.StreamableHTTPServer {
	return server.NewStreamableHTTPServer(s, server.WithStateful(true))
}
