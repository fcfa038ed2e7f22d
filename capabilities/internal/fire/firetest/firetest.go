// Package firetest holds test helpers shared by the trigger families: a
// recording node kind, a blocking node kind, and a host with a captured
// audit log.
package firetest

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Fired receives the trigger of every run of a "firetest_record" node.
var Fired = make(chan map[string]any, 64)

// Release unblocks one "firetest_block" node run.
var Release = make(chan struct{}, 64)

func init() {
	reg := func(kind string, f runtime.NodeFunc) {
		runtime.RegisterNode(runtime.NodeKind{Kind: kind, Family: "firetest",
			Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) { return f, nil }})
	}
	reg("firetest_record", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		Fired <- c.Run.Trigger()
		return runtime.Next(nil), nil
	})
	reg("firetest_fail", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Fail, Reason: "firetest failure"}, nil
	})
	reg("firetest_block", func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		select {
		case <-Release:
		case <-ctx.Done():
		}
		return runtime.Next(nil), nil
	})
}

// Buffer is a goroutine-safe log sink.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WaitFor polls until the log contains s.
func (b *Buffer) WaitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("audit log never contained %q:\n%s", s, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Host compiles the workflow TOML src into a host whose audit log is
// captured in the returned buffer.
func Host(t *testing.T, src string) (*runtime.Host, *Buffer) {
	t.Helper()
	var wf workflow.Workflow
	if _, err := toml.Decode(src, &wf); err != nil {
		t.Fatal(err)
	}
	wf.Digest = "test"
	p, err := runtime.Compile(&wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := &Buffer{}
	e := &runtime.Engine{Audit: slog.New(slog.NewTextHandler(buf, nil)), Services: &runtime.Services{}}
	return &runtime.Host{Engine: e, Program: p, ServeMode: true}, buf
}

// Next returns the next fired trigger or fails after timeout.
func Next(t *testing.T, timeout time.Duration) map[string]any {
	t.Helper()
	select {
	case trig := <-Fired:
		return trig
	case <-time.After(timeout):
		t.Fatalf("no run fired within %v", timeout)
	}
	return nil
}

// None asserts that no run fires within d.
func None(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case trig := <-Fired:
		t.Fatalf("unexpected run with trigger %v", trig)
	case <-time.After(d):
	}
}

// Drain empties Fired and Release between tests.
func Drain() {
	for {
		select {
		case <-Fired:
		case <-Release:
		default:
			return
		}
	}
}
