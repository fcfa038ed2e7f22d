package mock

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
)

func writeScript(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "turns.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func serveUnix(t *testing.T, s *Server) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "km")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "m.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeUnix(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeUnix: %v", err)
		}
	})
	return sock
}

func ask(text string) *intel.Request {
	return &intel.Request{Messages: []intel.Message{{Role: "user", Content: text}}}
}

func TestScriptAnswersInOrderAndFailsCallN(t *testing.T) {
	script, err := LoadScript(writeScript(t, `
fail_on_call = 2
[[turns]]
content = "first"
prompt_tokens = 12
completion_tokens = 3
[[turns]]
content = "second, estimated usage"
`))
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	s := New(script)
	s.Log = &log
	cl := &transport.Unix{Path: serveUnix(t, s)}
	ctx := context.Background()

	r1, err := cl.Complete(ctx, ask("hello"))
	if err != nil || r1.Content != "first" || r1.Usage.PromptTokens != 12 || r1.Usage.CompletionTokens != 3 {
		t.Fatalf("call 1: %+v %v", r1, err)
	}
	_, err = cl.Complete(ctx, ask("again"))
	var rpc *transport.RPCError
	if !errors.As(err, &rpc) || rpc.Code != CodeScripted || !strings.Contains(rpc.Message, "call 2") {
		t.Fatalf("call 2: %v", err)
	}
	r3, err := cl.Complete(ctx, ask(strings.Repeat("x", 40)))
	// The failed call consumed no turn; usage is estimated at ~4 chars/token.
	if err != nil || r3.Content != "second, estimated usage" || r3.Usage.PromptTokens != 10 || r3.Usage.CompletionTokens != 6 {
		t.Fatalf("call 3: %+v %v", r3, err)
	}
	_, err = cl.Complete(ctx, ask("more"))
	if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "script exhausted") {
		t.Fatalf("call 4: %v", err)
	}
	if s.Calls() != 4 || len(s.Requests()) != 4 || s.Requests()[0].Messages[0].Content != "hello" {
		t.Fatalf("calls = %d, requests = %+v", s.Calls(), s.Requests())
	}
	for _, want := range []string{"call 1: turn 1 (12+3 tokens)", "call 2: scripted failure", "call 4: script exhausted"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestServeHTTP(t *testing.T) {
	s := New(&Script{Turns: []Turn{{Content: "over http"}}})
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := (&transport.HTTP{URL: ts.URL + "/any/path"}).Complete(context.Background(), ask("q"))
	if err != nil || resp.Content != "over http" {
		t.Fatalf("%+v %v", resp, err)
	}
	get, err := http.Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET = %d", get.StatusCode)
	}
}

func TestMalformedRequests(t *testing.T) {
	s := New(&Script{Turns: []Turn{{Content: "x"}}})
	cases := map[string]string{
		`not json`: `"code":-32700`,
		`{"jsonrpc":"2.0","id":1,"method":"chat","params":{"messages":[]}}`: `"code":-32601`,
		`{"jsonrpc":"1.0","id":1,"method":"complete","params":{}}`:          `"code":-32600`,
		`{"jsonrpc":"2.0","method":"complete","params":{}}`:                 `"code":-32600`,
	}
	for in, want := range cases {
		out := string(s.Answer(context.Background(), []byte(in)))
		if !strings.Contains(out, want) || !strings.Contains(out, `"jsonrpc":"2.0"`) {
			t.Errorf("%s -> %s, want %s", in, out, want)
		}
	}
	if s.Calls() != 0 {
		t.Fatal("malformed requests consumed calls")
	}
}

func TestDelayedTurnStopsWithServer(t *testing.T) {
	s := New(&Script{Turns: []Turn{{Content: "slow", DelayMS: 60_000}}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if out := s.Answer(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"complete","params":{"messages":[]}}`)); out != nil {
		t.Fatalf("answered after shutdown: %s", out)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the delay ignored shutdown")
	}
}

func TestLoadScriptErrors(t *testing.T) {
	cases := map[string]string{
		"":                                       "no [[turns]]",
		"[[turns]]\ncontent = \"x\"\ncolour = 1": "colour: unknown key",
		"fail_on_call = -1\n[[turns]]\ncontent = \"x\"":  "fail_on_call",
		"[[turns]]\ncontent = \"x\"\nprompt_tokens = -3": "must not be negative",
		"[[turns]\ncontent = \"x\"":                      "turns.toml",
	}
	for text, want := range cases {
		if _, err := LoadScript(writeScript(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", text, err, want)
		}
	}
	if _, err := LoadScript(filepath.Join(t.TempDir(), "none.toml")); err == nil {
		t.Error("missing script accepted")
	}
}

func TestShutdownDoesNotWaitForIdleClients(t *testing.T) {
	dir, _ := os.MkdirTemp("", "km")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "m.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(&Script{Turns: []Turn{{Content: "x"}}}).ServeUnix(ctx, ln) }()
	idle, err := net.Dial("unix", sock) // connects, never sends a frame
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("ServeUnix waited on an idle client")
	}
}

// A turn with expect answers only a call whose messages contain every
// text; a call missing one gets a scripted error naming it.
func TestTurnExpectChecksTheRequest(t *testing.T) {
	script, err := LoadScript(writeScript(t, `
[[turns]]
content = "repaired"
expect = ["unknown_node_kind", "line 7"]
[[turns]]
content = "second"
expect = ["never sent"]
[[turns]]
content = "third"
`))
	if err != nil {
		t.Fatal(err)
	}
	c := &transport.Unix{Path: serveUnix(t, New(script))}
	ctx := context.Background()
	req := &intel.Request{Messages: []intel.Message{{Role: "system", Content: "fix these: unknown_node_kind"}, {Role: "user", Content: "at line 7"}}}
	res, err := c.Complete(ctx, req)
	if err != nil || res.Content != "repaired" {
		t.Fatalf("matching call: %v %+v", err, res)
	}
	_, err = c.Complete(ctx, ask("something else"))
	if err == nil || !strings.Contains(err.Error(), `does not contain the expected text "never sent"`) {
		t.Fatalf("mismatching call: want the missing text named, got %v", err)
	}
	if res, err := c.Complete(ctx, ask("x")); err != nil || res.Content != "third" {
		t.Fatalf("the failed turn must be used up: %v %+v", err, res)
	}
	if _, err := LoadScript(writeScript(t, "[[turns]]\ncontent = \"x\"\nexpect = [\"\"]\n")); err == nil || !strings.Contains(err.Error(), "empty text") {
		t.Fatalf("empty expect text: %v", err)
	}
}
