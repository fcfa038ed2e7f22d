// Package mock is a scripted intelligence server speaking the `default`
// backend wire (length-framed JSON-RPC 2.0 on a Unix socket, or the same
// envelope over HTTP). It answers calls with the script's turns in order
// and can fail one chosen call, so examples and demos run without an
// account. `kiln intel-mock` serves it.
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/capabilities/llm/transport"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/nesting"
)

// Turn is one scripted answer.
type Turn struct {
	Content string `toml:"content"`
	// Token usage reported for this turn; when absent, about one token per
	// four characters of the prompt and of the answer.
	PromptTokens     *int64 `toml:"prompt_tokens"`
	CompletionTokens *int64 `toml:"completion_tokens"`
	// DelayMS delays the answer (to demonstrate deadlines).
	DelayMS int `toml:"delay_ms"`
	// Expect lists texts the call's messages must contain for this turn to
	// be answered, so a script can check what the client sent (a drafting
	// repair round must quote the issues it repairs). A call missing one
	// gets a JSON-RPC error naming it, and the turn is used up.
	Expect []string `toml:"expect"`
}

// Script is a turns file:
//
//	fail_on_call = 2          # optional: call 2 gets a JSON-RPC error
//	[[turns]]
//	content = "positive"
//	prompt_tokens = 12        # optional
//	completion_tokens = 1     # optional
//	expect = ["unknown_kind"] # optional: texts the call must contain
type Script struct {
	FailOnCall int    `toml:"fail_on_call"`
	Turns      []Turn `toml:"turns"`
}

// LoadScript reads a turns file strictly: unknown keys are errors.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := nesting.TOML(data); err != nil { // before the decoder, as for every TOML kiln reads
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var s Script
	md, err := toml.Decode(string(data), &s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, fmt.Errorf("%s: %s: unknown key", path, und[0])
	}
	if len(s.Turns) == 0 {
		return nil, fmt.Errorf("%s: no [[turns]]", path)
	}
	if s.FailOnCall < 0 {
		return nil, fmt.Errorf("%s: fail_on_call must be 1 or more", path)
	}
	for i, t := range s.Turns {
		if (t.PromptTokens != nil && *t.PromptTokens < 0) || (t.CompletionTokens != nil && *t.CompletionTokens < 0) || t.DelayMS < 0 {
			return nil, fmt.Errorf("%s: turns[%d]: token counts and delay_ms must not be negative", path, i)
		}
		for _, e := range t.Expect {
			if e == "" {
				return nil, fmt.Errorf("%s: turns[%d]: expect has an empty text", path, i)
			}
		}
	}
	return &s, nil
}

// JSON-RPC error codes the server uses.
const (
	CodeParse          = -32700
	CodeInvalidRequest = -32600
	CodeNoMethod       = -32601
	CodeScripted       = -32001 // fail_on_call, or the script ran out of turns
)

// Server answers calls from a script. Safe for concurrent connections;
// calls are numbered in arrival order.
type Server struct {
	script *Script
	// Log, when set, gets one line per call.
	Log io.Writer

	mu       sync.Mutex
	calls    int // calls received
	turn     int // turns answered
	requests []intel.Request
}

// New returns a server for s.
func New(s *Script) *Server { return &Server{script: s} }

// Calls reports how many calls the server has received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Requests returns the params of every well-formed call so far, in order.
func (s *Server) Requests() []intel.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]intel.Request(nil), s.requests...)
}

// Answer handles one raw request body and returns the response body.
func (s *Server) Answer(ctx context.Context, body []byte) []byte {
	var req transport.Request
	if err := json.Unmarshal(body, &req); err != nil {
		return s.reply(nil, nil, &transport.RPCError{Code: CodeParse, Message: "parse error: " + err.Error()})
	}
	switch {
	case req.JSONRPC != "2.0" || len(req.ID) == 0 || req.Params == nil:
		return s.reply(req.ID, nil, &transport.RPCError{Code: CodeInvalidRequest, Message: "invalid request: want jsonrpc \"2.0\", an id and params"})
	case req.Method != transport.Method:
		return s.reply(req.ID, nil, &transport.RPCError{Code: CodeNoMethod, Message: fmt.Sprintf("method %q not found", req.Method)})
	}

	s.mu.Lock()
	s.calls++
	s.requests = append(s.requests, *req.Params)
	call := s.calls
	var turn *Turn
	fail := call == s.script.FailOnCall
	if !fail && s.turn < len(s.script.Turns) {
		turn = &s.script.Turns[s.turn]
		s.turn++
	}
	n := s.turn
	s.mu.Unlock()

	switch {
	case fail:
		s.logf("call %d: scripted failure", call)
		return s.reply(req.ID, nil, &transport.RPCError{Code: CodeScripted, Message: fmt.Sprintf("scripted failure on call %d", call)})
	case turn == nil:
		s.logf("call %d: script exhausted", call)
		return s.reply(req.ID, nil, &transport.RPCError{Code: CodeScripted, Message: fmt.Sprintf("script exhausted: all %d turns used", len(s.script.Turns))})
	}
	if missing, ok := lacking(req.Params.Messages, turn.Expect); !ok {
		s.logf("call %d: turn %d expected %q, not in the request", call, n, missing)
		return s.reply(req.ID, nil, &transport.RPCError{Code: CodeScripted, Message: fmt.Sprintf("turn %d: the request does not contain the expected text %q", n, missing)})
	}
	if turn.DelayMS > 0 {
		t := time.NewTimer(time.Duration(turn.DelayMS) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
	usage := intel.Usage{PromptTokens: estimate(req.Params.Messages), CompletionTokens: (int64(len(turn.Content)) + 3) / 4}
	if turn.PromptTokens != nil {
		usage.PromptTokens = *turn.PromptTokens
	}
	if turn.CompletionTokens != nil {
		usage.CompletionTokens = *turn.CompletionTokens
	}
	s.logf("call %d: turn %d (%d+%d tokens)", call, n, usage.PromptTokens, usage.CompletionTokens)
	return s.reply(req.ID, &intel.Response{Content: turn.Content, Usage: usage}, nil)
}

// lacking returns the first expected text that no message contains.
func lacking(msgs []intel.Message, expect []string) (string, bool) {
	for _, e := range expect {
		found := false
		for _, m := range msgs {
			if strings.Contains(m.Content, e) {
				found = true
				break
			}
		}
		if !found {
			return e, false
		}
	}
	return "", true
}

func estimate(msgs []intel.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(m.Content))
	}
	return (n + 3) / 4
}

func (s *Server) reply(id json.RawMessage, res *intel.Response, rerr *transport.RPCError) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	out, _ := runtime.EncodeJSON(&transport.Response{JSONRPC: "2.0", ID: id, Result: res, Error: rerr})
	return out
}

func (s *Server) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "intel-mock: "+format+"\n", args...)
	}
}

// ServeUnix accepts framed connections on ln until ctx ends: one request
// frame and one reply frame per connection.
func (s *Server) ServeUnix(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			// Shutdown must not wait on a client that never sends its frame.
			stopConn := context.AfterFunc(ctx, func() { conn.Close() })
			defer stopConn()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Minute))
			body, err := transport.ReadFrame(conn)
			if err != nil {
				s.logf("dropping a connection: %v", err)
				return
			}
			if out := s.Answer(ctx, body); out != nil {
				_ = transport.WriteFrame(conn, out)
			}
		}()
	}
}

// ServeHTTP answers the envelope POSTed to any path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a JSON-RPC request", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, transport.MaxFrame))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	out := s.Answer(r.Context(), body)
	if out == nil {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}
