package llm_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/env"
	_ "github.com/kilnworks/kiln/capabilities/fs"
)

// turn is one scripted answer with explicit usage.
func turn(content string, prompt, completion int64) mock.Turn {
	return mock.Turn{Content: content, PromptTokens: &prompt, CompletionTokens: &completion}
}

// startMock serves a script on a real Unix socket (short path: sun_path
// is ~108 bytes) and returns the server and the socket path.
func startMock(t *testing.T, script *mock.Script) (*mock.Server, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "intel.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := mock.New(script)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeUnix(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv, sock
}

// compile decodes workflow TOML, attaches assets as the loader would, and
// compiles it with every linked family.
func compile(t *testing.T, src string, assets map[string][]byte) *runtime.Program {
	t.Helper()
	p, err := tryCompile(src, assets)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tryCompile(src string, assets map[string][]byte) (*runtime.Program, error) {
	wf, err := gen.Decode("workflow.toml", []byte(src))
	if err != nil {
		return nil, err
	}
	wf.Assets = assets
	return runtime.Compile(wf, runtime.CompileOptions{})
}

// syncBuf is a goroutine-safe audit sink.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// engineFor builds an engine for p whose default backend is the Unix
// socket sock, through the extension's own Setup.
func engineFor(t *testing.T, p *runtime.Program, sock string) (*runtime.Engine, *syncBuf) {
	t.Helper()
	audit := &syncBuf{}
	e := &runtime.Engine{Audit: slog.New(slog.NewJSONHandler(audit, nil))}
	if err := llm.SetupForTest(&runtime.Host{Engine: e, Program: p}, sock, "", "", nil); err != nil {
		t.Fatal(err)
	}
	return e, audit
}

func runOnce(t *testing.T, e *runtime.Engine, p *runtime.Program, payload map[string]any) *runtime.Report {
	t.Helper()
	return e.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", payload), Timeout: 10 * time.Second})
}

// output returns a node's output from the trace.
func output(t *testing.T, r *runtime.Report, node string) map[string]any {
	t.Helper()
	for _, e := range r.Trace.Entries {
		if e.NodeID == node {
			m, _ := e.Output.(map[string]any)
			return m
		}
	}
	t.Fatalf("node %s not in trace %v", node, r.Trace.Path())
	return nil
}

func wantStatus(t *testing.T, r *runtime.Report, status string, reasonHas ...string) {
	t.Helper()
	if r.Outcome.Status != status {
		t.Fatalf("status = %s (%s), want %s", r.Outcome.Status, r.Outcome.Reason, status)
	}
	for _, s := range reasonHas {
		if !strings.Contains(r.Outcome.Reason, s) {
			t.Errorf("reason %q does not contain %q", r.Outcome.Reason, s)
		}
	}
}
