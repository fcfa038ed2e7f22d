package llm

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// readyz fetches /readyz from the ops handler served on loopback.
func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadinessFollowsBackends: in serve mode /readyz holds until every
// declared intelligence backend (the default transport on a Unix socket,
// a named backend over TCP) accepted a probe, and turns 503 naming the
// backend once its real loopback server is closed. A probe sends nothing:
// the backend's HTTP server never sees a request.
func TestReadinessFollowsBackends(t *testing.T) {
	defer func(e, to time.Duration) { probeEvery, probeTimeout = e, to }(probeEvery, probeTimeout)
	probeEvery, probeTimeout = 20*time.Millisecond, 2*time.Second

	var requests atomic.Int64
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) })}
	go backend.Serve(tcpLn)
	defer backend.Close()

	sock := filepath.Join(t.TempDir(), "intel.sock")
	unixLn, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := unixLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	defer unixLn.Close()

	wf := &workflow.Workflow{Name: "agent", Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{{
		Name: "remote", Provider: "openai-compatible", Model: "m", BaseURL: "http://" + tcpLn.Addr().String() + "/v1", APIKeyEnv: "REMOTE_KEY",
	}}}}
	h := &runtime.Host{Engine: &runtime.Engine{}, Program: &runtime.Program{Workflow: wf}, ServeMode: true}
	if err := setup(h, config{unix: sock}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ls, err := readinessListeners(h)
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners %v, %v", ls, err)
	}
	if ok, why := h.Ready(); ok || len(why) != 2 {
		t.Fatalf("ready before any probe: %v %v", ok, why)
	}

	opsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opsSrv := &http.Server{Handler: ops.Handler(h)}
	go opsSrv.Serve(opsLn)
	defer opsSrv.Close()
	opsURL := "http://" + opsLn.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls[0].Serve(ctx) }()
	waitUntil(t, "ready with both backends up", func() bool { code, _ := readyz(t, opsURL); return code == 200 })

	backend.Close() // the named backend goes away
	var body string
	waitUntil(t, "503 naming the closed backend", func() bool {
		var code int
		code, body = readyz(t, opsURL)
		return code == 503
	})
	var r struct {
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Reasons) != 1 ||
		!strings.HasPrefix(r.Reasons[0], "intelligence backend remote: tcp "+tcpLn.Addr().String()+" unreachable") {
		t.Fatalf("readyz %s", body)
	}
	unixLn.Close()
	waitUntil(t, "both backends named", func() bool {
		_, body = readyz(t, opsURL)
		return strings.Contains(body, "intelligence backend default: unix")
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the readiness listener did not stop")
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("the backend got %d requests from probes", n)
	}
}

// TestNoReadinessWithoutBackends: nothing declared, nothing probed, and
// route-all probes only the transport every backend goes to.
func TestNoReadinessWithoutBackends(t *testing.T) {
	h := &runtime.Host{Engine: &runtime.Engine{}, Program: &runtime.Program{Workflow: &workflow.Workflow{Name: "a"}}}
	if err := setup(h, config{}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if ls, err := readinessListeners(h); err != nil || ls != nil {
		t.Fatalf("listeners %v %v", ls, err)
	}
	wf := &workflow.Workflow{Name: "a", Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{{
		Name: "cloud", Provider: "anthropic", Model: "m", APIKeyEnv: "K"}}}}
	h = &runtime.Host{Engine: &runtime.Engine{}, Program: &runtime.Program{Workflow: wf}}
	if err := setup(h, config{httpURL: "http://127.0.0.1:9/rpc", routeAll: true}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	v, _ := h.Engine.Services.Values.Load(probeTargetsKey{})
	if got := v.([]probeTarget); len(got) != 1 || got[0].addr != "127.0.0.1:9" {
		t.Fatalf("route-all targets %+v", got)
	}
	h = &runtime.Host{Engine: &runtime.Engine{}, Program: &runtime.Program{Workflow: wf}}
	if err := setup(h, config{}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	v, _ = h.Engine.Services.Values.Load(probeTargetsKey{})
	if got := v.([]probeTarget); len(got) != 1 || got[0].addr != "api.anthropic.com:443" || got[0].name != "cloud" {
		t.Fatalf("provider default targets %+v", got)
	}
}
