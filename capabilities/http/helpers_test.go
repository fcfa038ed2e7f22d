package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Test node kinds. They let these tests drive every outcome the server
// maps to a status code without depending on other families; the mode is
// the node's `key`.
var (
	gate     = make(chan struct{}) // "block" nodes wait for it to close (or their deadline)
	gateMu   sync.Mutex
	runCount atomic.Int64 // incremented by every "count" node
)

func resetGate() chan struct{} {
	gateMu.Lock()
	defer gateMu.Unlock()
	gate = make(chan struct{})
	return gate
}

func currentGate() chan struct{} {
	gateMu.Lock()
	defer gateMu.Unlock()
	return gate
}

func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "httptest_node", Family: "httptest",
		Prepare: func(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				trig := c.Run.Trigger()
				switch c.Node.Key {
				case "echo":
					return runtime.Next(map[string]any{"trigger": trig, "traceparent": runtime.Traceparent(ctx)}), nil
				case "count":
					runCount.Add(1)
					return runtime.Next(map[string]any{"count": true}), nil
				case "count_fail":
					runCount.Add(1)
					return runtime.Result{Action: runtime.Fail, Reason: "counted failure"}, nil
				case "fail":
					return runtime.Result{Action: runtime.Fail, Reason: "order rejected"}, nil
				case "pause":
					return runtime.Result{Action: runtime.Pause, Reason: "needs approval"}, nil
				case "respond":
					name, _ := trig["name"].(string)
					return runtime.Result{Value: map[string]any{"status": 201},
						Respond: &runtime.HTTPResponse{Status: 201, ContentType: "text/plain", Body: "hello " + name}}, nil
				case "deny":
					return runtime.Result{}, c.Run.Policy().EnvRead("SECRET_KEY")
				case "error":
					return runtime.Result{}, c.Errorf(runtime.ClassTool, "backend exploded")
				case "block":
					select {
					case <-currentGate():
						runCount.Add(1)
						return runtime.Next(map[string]any{"released": true}), nil
					case <-ctx.Done():
						return runtime.Result{}, ctx.Err()
					}
				}
				return runtime.Result{}, errors.New("unknown test mode " + c.Node.Key)
			}, nil
		}})
}

// syncBuffer collects audit lines from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is one server on a loopback port.
type testServer struct {
	*Server
	URL    string
	Audit  *syncBuffer
	Client *http.Client
	cancel context.CancelFunc
	done   chan error
}

type setup struct {
	cfg      Config
	stateDir string // "-" = none
	assets   map[string][]byte
	services *runtime.Services
	tls      bool // dial with https (client must be configured by the test)
}

// newHost compiles a workflow from TOML text.
func newHost(t testing.TB, src string, st setup) *runtime.Host {
	t.Helper()
	wf, err := gen.Decode("workflow.toml", []byte(src))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	wf.Assets = st.assets
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	dir := st.stateDir
	switch dir {
	case "":
		dir = t.TempDir()
	case "-":
		dir = ""
	}
	return &runtime.Host{Program: p, Engine: &runtime.Engine{StateDir: dir, Services: st.services}}
}

func start(t *testing.T, src string, st setup) *testServer {
	t.Helper()
	h := newHost(t, src, st)
	buf := &syncBuffer{}
	h.Engine.Audit = newTestAudit(buf)
	s, err := New(h, st.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return serve(t, s, buf, st.tls)
}

func serve(t *testing.T, s *Server, buf *syncBuffer, useTLS bool) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{Server: s, Audit: buf, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- s.ServeListener(ctx, ln) }()
	scheme := "http"
	if useTLS {
		scheme = "https"
	}
	ts.URL = scheme + "://" + ln.Addr().String()
	ts.Client = newClient()
	t.Cleanup(func() {
		ts.Client.CloseIdleConnections()
		ts.stop(t)
	})
	return ts
}

// stop cancels the serve context and waits for ServeListener to return.
func (ts *testServer) stop(t *testing.T) error {
	ts.cancel()
	select {
	case err := <-ts.done:
		ts.done <- err // keep it for a second caller
		return err
	case <-time.After(40 * time.Second):
		t.Fatal("server did not stop")
	}
	return nil
}

type resp struct {
	code   int
	header http.Header
	body   string
	json   map[string]any
	tls    *tls.ConnectionState
}

func (ts *testServer) do(t *testing.T, method, path string, body string, headers ...string) resp {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return ts.send(t, req)
}

func (ts *testServer) send(t *testing.T, req *http.Request) resp {
	t.Helper()
	r, err := ts.sendErr(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return r
}

// try is do for goroutines: errors come back as code -1.
func (ts *testServer) try(method, path, body string) resp {
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		return resp{code: -1, body: err.Error()}
	}
	r, err := ts.sendErr(req)
	if err != nil {
		return resp{code: -1, body: err.Error()}
	}
	return r
}

func (ts *testServer) sendErr(req *http.Request) (resp, error) {
	res, err := ts.Client.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out := resp{code: res.StatusCode, header: res.Header, body: string(b), tls: res.TLS}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") && len(b) > 0 {
		v, err := runtime.DecodeJSON(b)
		if err != nil {
			return out, fmt.Errorf("reply is not JSON: %v: %s", err, b)
		}
		out.json, _ = v.(map[string]any)
	}
	return out, nil
}

func (r resp) expect(t *testing.T, code int) resp {
	t.Helper()
	if r.code != code {
		t.Fatalf("status %d, want %d; body %s", r.code, code, r.body)
	}
	return r
}

// at resolves a dotted path in the JSON reply.
func (r resp) at(path string) any {
	v, _ := runtime.Lookup(map[string]any(r.json), path)
	return v
}

// wf builds a one-route workflow around one test node.
func wf(mode string, route string) string {
	return `
name = "hooks"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "n"
[[nodes]]
id = "n"
type = "httptest_node"
key = "` + mode + `"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
` + route
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func newTestAudit(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, nil))
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
}
