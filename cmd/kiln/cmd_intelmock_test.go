package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
	"github.com/kilnworks/kiln/runtime/cli"
)

// intelMockBuffer is written by the server goroutine and read by the test.
type intelMockBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *intelMockBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *intelMockBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const intelTurnsTOML = `
fail_on_call = 2
[[turns]]
content = "positive"
prompt_tokens = 12
completion_tokens = 1
[[turns]]
content = "negative"
`

// startIntelMock runs the command until the test ends and returns the
// address line it printed.
func startIntelMock(t *testing.T, args ...string) (addr string, stderr *intelMockBuffer) {
	t.Helper()
	return startIntelMockScript(t, intelTurnsTOML, args...)
}

// startIntelMockScript is startIntelMock with the turns file's text.
func startIntelMockScript(t *testing.T, turns string, args ...string) (addr string, stderr *intelMockBuffer) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "turns.toml")
	os.WriteFile(script, []byte(turns), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &intelMockBuffer{}, &intelMockBuffer{}
	code := make(chan int, 1)
	go func() { code <- runIntelMock(ctx, append(args, "--script", script), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != cli.ExitOK {
				t.Errorf("exit %d; stderr:\n%s", c, stderr)
			}
		case <-time.After(5 * time.Second):
			t.Error("intel-mock did not stop on cancel")
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if line := stdout.String(); strings.HasSuffix(line, "\n") {
			return strings.TrimSpace(line), stderr
		}
		select {
		case c := <-code:
			t.Fatalf("exited %d early; stderr:\n%s", c, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("intel-mock never reported its address")
	return "", nil
}

func intelAsk(text string) *intel.Request {
	return &intel.Request{Messages: []intel.Message{{Role: "user", Content: text}}}
}

func TestIntelMockUnixSocket(t *testing.T) {
	dir, _ := os.MkdirTemp("", "kim")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "intel.sock")
	t.Run("serve", func(t *testing.T) {
		addr, stderr := startIntelMock(t, "--socket", sock)
		if addr != "--intel-unix "+sock {
			t.Fatalf("address line = %q", addr)
		}
		fi, err := os.Stat(sock)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket mode: %v %v", fi, err)
		}
		cl := &transport.Unix{Path: sock}
		r, err := cl.Complete(context.Background(), intelAsk("hi"))
		if err != nil || r.Content != "positive" || r.Usage.PromptTokens != 12 {
			t.Fatalf("call 1: %+v %v", r, err)
		}
		if _, err := cl.Complete(context.Background(), intelAsk("hi")); err == nil || !strings.Contains(err.Error(), "scripted failure on call 2") {
			t.Fatalf("call 2: %v", err)
		}
		if r, err := cl.Complete(context.Background(), intelAsk("hi")); err != nil || r.Content != "negative" {
			t.Fatalf("call 3: %+v %v", r, err)
		}
		if !strings.Contains(stderr.String(), "call 1: turn 1 (12+1 tokens)") {
			t.Errorf("stderr:\n%s", stderr)
		}
		// A second server on the same live socket is refused.
		script := filepath.Join(t.TempDir(), "turns.toml")
		os.WriteFile(script, []byte(intelTurnsTOML), 0o644)
		var errOut bytes.Buffer
		if code := runIntelMock(context.Background(), []string{"--socket", sock, "--script", script}, &bytes.Buffer{}, &errOut); code != cli.ExitUsage || !strings.Contains(errOut.String(), "in use") {
			t.Fatalf("second server: exit %d, %s", code, errOut.String())
		}
	})
	// Stopping removes the socket file.
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestIntelMockHTTP(t *testing.T) {
	addr, _ := startIntelMock(t, "--http", "127.0.0.1:0", "--quiet")
	url, ok := strings.CutPrefix(addr, "--intel-http ")
	if !ok {
		t.Fatalf("address line = %q", addr)
	}
	r, err := (&transport.HTTP{URL: url}).Complete(context.Background(), intelAsk("hi"))
	if err != nil || r.Content != "positive" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestIntelMockUsageErrors(t *testing.T) {
	script := filepath.Join(t.TempDir(), "turns.toml")
	os.WriteFile(script, []byte(intelTurnsTOML), 0o644)
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("[[turns]]\ncontnet = \"typo\"\n"), 0o644)
	notSocket := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notSocket, nil, 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--socket", "/tmp/x.sock"}, "usage"},
		{[]string{"--script", script}, "usage"},
		{[]string{"--socket", "/tmp/x.sock", "--http", ":0", "--script", script}, "usage"},
		{[]string{"--socket", "/tmp/x.sock", "--script", bad}, "contnet"},
		{[]string{"--socket", notSocket, "--script", script}, "is not a socket"},
		{[]string{"--http", "256.0.0.1:bad", "--script", script}, "kiln intel-mock"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		if code := runIntelMock(context.Background(), tc.args, &bytes.Buffer{}, &stderr); code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr.String())
		}
	}
	if _, err := os.Stat(notSocket); err != nil {
		t.Fatal("a regular file in the socket's place was removed")
	}
}
