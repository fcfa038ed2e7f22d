package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
)

// unixServer listens on a fresh socket and runs handle for every
// connection. Socket paths must stay short (sun_path is ~108 bytes), so
// they live in their own short temp dir rather than t.TempDir().
func unixServer(t *testing.T, handle func(conn net.Conn)) (path string, conns *atomic.Int64) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return path, conns
}

// readRequest reads and decodes one framed request the way a real server
// would, checking the little-endian header by hand.
func readRequest(t *testing.T, c net.Conn) (map[string]any, []byte) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Errorf("server: reading header: %v", err)
		return nil, nil
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Errorf("server: reading body: %v", err)
		return nil, nil
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Errorf("server: request is not JSON: %v", err)
	}
	return req, body
}

func frame(payload string) []byte {
	b := make([]byte, 4+len(payload))
	binary.LittleEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func ask(text string) *intel.Request {
	return &intel.Request{Messages: []intel.Message{{Role: "user", Content: text}}}
}

func TestUnixRoundTripAndEnvelope(t *testing.T) {
	path, conns := unixServer(t, func(c net.Conn) {
		req, _ := readRequest(t, c)
		if req["jsonrpc"] != "2.0" || req["method"] != "complete" {
			t.Errorf("envelope = %v", req)
		}
		params := req["params"].(map[string]any)
		if params["max_tokens"] != float64(DefaultMaxTokens) || params["model"] != "default" {
			t.Errorf("params defaults = %v", params)
		}
		msgs := params["messages"].([]any)
		content := msgs[0].(map[string]any)["content"].(string)
		id, _ := json.Marshal(req["id"])
		reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"echo: %s","usage":{"prompt_tokens":12,"completion_tokens":3}}}`, id, content)
		c.Write(frame(reply))
		// One connection per call: the client closes after the reply.
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("client did not close the connection after the reply: %v", err)
		}
	})
	cl := &Unix{Path: path}
	for i := 0; i < 3; i++ {
		resp, err := cl.Complete(context.Background(), ask(fmt.Sprint("hi ", i)))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != fmt.Sprint("echo: hi ", i) || resp.Usage.PromptTokens != 12 || resp.Usage.CompletionTokens != 3 {
			t.Fatalf("resp = %+v", resp)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want one per call (3)", n)
	}
}

func TestUnixIDsAreFreshPerCall(t *testing.T) {
	ids := make(chan string, 2)
	path, _ := unixServer(t, func(c net.Conn) {
		req, _ := readRequest(t, c)
		id, _ := json.Marshal(req["id"])
		ids <- string(id)
		c.Write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"x"}}`, id)))
	})
	cl := &Unix{Path: path}
	for i := 0; i < 2; i++ {
		if _, err := cl.Complete(context.Background(), ask("q")); err != nil {
			t.Fatal(err)
		}
	}
	a, b := <-ids, <-ids
	if a == b {
		t.Fatalf("two calls used the same id %s", a)
	}
}

func TestUnixFaults(t *testing.T) {
	big := make([]byte, 4)
	binary.LittleEndian.PutUint32(big, MaxFrame+1)
	cases := []struct {
		name  string
		reply func(c net.Conn, id string)
		want  []string
	}{
		{"id mismatch", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":999999,"result":{"content":"x"}}`))
		}, []string{"transport fault", "does not match request id"}},
		{"string id", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":"` + id + `","result":{"content":"x"}}`))
		}, []string{"transport fault", "does not match"}},
		{"truncated frame", func(c net.Conn, id string) {
			full := frame(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":"x"}}`)
			c.Write(full[:len(full)-5])
		}, []string{"transport fault", "truncated frame"}},
		{"truncated header", func(c net.Conn, id string) {
			c.Write([]byte{7, 0})
		}, []string{"transport fault", "truncated frame header"}},
		{"oversize frame", func(c net.Conn, id string) {
			c.Write(big) // and never the body: the client must not wait for it
			time.Sleep(2 * time.Second)
		}, []string{"transport fault", "exceeds the 16777216-byte cap"}},
		{"closed without reply", func(c net.Conn, id string) {}, []string{"transport fault", "connection closed before a frame"}},
		{"not JSON", func(c net.Conn, id string) { c.Write(frame("hello")) }, []string{"transport fault", "not a JSON-RPC object"}},
		{"wrong version", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"1.0","id":` + id + `,"result":{"content":"x"}}`))
		}, []string{"transport fault", "jsonrpc"}},
		{"no content", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":` + id + `,"result":{"text":"x"}}`))
		}, []string{"transport fault", "no content"}},
		{"both result and error", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":"x"},"error":{"code":1,"message":"m"}}`))
		}, []string{"transport fault", "both result and error"}},
		{"neither", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":` + id + `}`))
		}, []string{"transport fault", "neither"}},
		{"negative usage", func(c net.Conn, id string) {
			c.Write(frame(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":"x","usage":{"prompt_tokens":-5}}}`))
		}, []string{"transport fault", "negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path, _ := unixServer(t, func(c net.Conn) {
				req, _ := readRequest(t, c)
				id, _ := json.Marshal(req["id"])
				tc.reply(c, string(id))
			})
			start := time.Now()
			_, err := (&Unix{Path: path}).Complete(context.Background(), ask("q"))
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if time.Since(start) > time.Second {
				t.Errorf("took %v: the client waited on a broken reply", time.Since(start))
			}
		})
	}
}

func TestUnixRPCErrorObject(t *testing.T) {
	path, _ := unixServer(t, func(c net.Conn) {
		req, _ := readRequest(t, c)
		id, _ := json.Marshal(req["id"])
		c.Write(frame(`{"jsonrpc":"2.0","id":` + string(id) + `,"error":{"code":-32001,"message":"model overloaded"}}`))
	})
	_, err := (&Unix{Path: path}).Complete(context.Background(), ask("q"))
	var rpc *RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32001 || rpc.Message != "model overloaded" {
		t.Fatalf("err = %v, want the server's error object", err)
	}
	if strings.Contains(err.Error(), "transport fault") {
		t.Fatalf("a JSON-RPC error is the server's answer, not a transport fault: %v", err)
	}
}

func TestUnixSlowServerHitsDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	path, _ := unixServer(t, func(c net.Conn) {
		readRequest(t, c)
		<-release // never answers in time
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&Unix{Path: path}).Complete(ctx, ask("q"))
	if err == nil || !strings.Contains(err.Error(), "transport fault") {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v does not carry the deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v past a 200ms deadline", d)
	}
}

func TestUnixCancelWithoutDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	path, _ := unixServer(t, func(c net.Conn) {
		readRequest(t, c)
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	start := time.Now()
	_, err := (&Unix{Path: path}).Complete(ctx, ask("q"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancellation", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v after cancel", d)
	}
}

func TestUnixDialFailure(t *testing.T) {
	_, err := (&Unix{Path: filepath.Join(t.TempDir(), "nobody.sock")}).Complete(context.Background(), ask("q"))
	if err == nil || !strings.Contains(err.Error(), "transport fault: dial") {
		t.Fatalf("err = %v", err)
	}
}

func TestOversizeRequestRefusedBeforeSending(t *testing.T) {
	path, conns := unixServer(t, func(c net.Conn) {
		req, _ := readRequest(t, c)
		id, _ := json.Marshal(req["id"])
		c.Write(frame(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":"x"}}`, id)))
	})
	cl := &Unix{Path: path}
	_, err := cl.Complete(context.Background(), ask(strings.Repeat("x", MaxFrame)))
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v", err)
	}
	// A small request after it is the fence, not a fixed sleep: the server
	// accepts connections in order, so once it has answered this one, a
	// connection the oversize request made would have been counted.
	if _, err := cl.Complete(context.Background(), ask("q")); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want only the small request's: the oversize request was sent anyway", n)
	}
}

func TestFrameHelpers(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes()[:4]; !bytes.Equal(got, []byte{7, 0, 0, 0}) {
		t.Fatalf("header = %v, want little-endian 7", got)
	}
	got, err := ReadFrame(&buf)
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("ReadFrame = %q, %v", got, err)
	}
	if _, err := ReadFrame(&buf); !errors.Is(err, ErrNoFrame) {
		t.Fatalf("empty stream: %v", err)
	}
	if err := WriteFrame(io.Discard, make([]byte, MaxFrame+1)); err == nil {
		t.Fatal("WriteFrame accepted an oversize frame")
	}
	// Exactly the cap is allowed.
	var capBuf bytes.Buffer
	if err := WriteFrame(&capBuf, make([]byte, MaxFrame)); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFrame(&capBuf); err != nil || len(got) != MaxFrame {
		t.Fatalf("frame at the cap: %d bytes, %v", len(got), err)
	}
}

func TestHTTPRoundTripWithBearer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/rpc" {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer tok-123" {
			t.Errorf("Authorization = %q", got)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		body, _ := io.ReadAll(r.Body)
		if len(body) >= 4 && body[0] != '{' {
			t.Errorf("HTTP body must be unframed JSON, got %q", body[:4])
		}
		var req Request
		if err := json.Unmarshal(body, &req); err != nil || req.Method != "complete" || req.Params.Messages[0].Content != "ping" {
			t.Errorf("request = %s (%v)", body, err)
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":"pong","usage":{"prompt_tokens":2,"completion_tokens":1}}}`, req.ID)
	}))
	defer srv.Close()
	resp, err := (&HTTP{URL: srv.URL + "/rpc", Bearer: "tok-123"}).Complete(context.Background(), ask("ping"))
	if err != nil || resp.Content != "pong" || resp.Usage.PromptTokens != 2 {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func TestHTTPFaults(t *testing.T) {
	t.Run("non-2xx with excerpt, bearer masked", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "upstream said no to token tok-SECRET "+strings.Repeat("z", 2000))
		}))
		defer srv.Close()
		_, err := (&HTTP{URL: srv.URL, Bearer: "tok-SECRET"}).Complete(context.Background(), ask("q"))
		if err == nil || !strings.Contains(err.Error(), "transport fault: HTTP 502") || !strings.Contains(err.Error(), "upstream said no") {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "tok-SECRET") {
			t.Fatalf("bearer leaked into the error: %v", err)
		}
		if len(err.Error()) > 700 {
			t.Fatalf("error is %d bytes: the excerpt is not bounded", len(err.Error()))
		}
	})
	t.Run("rpc error object", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req Request
			json.NewDecoder(r.Body).Decode(&req)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"quota"}}`, req.ID)
		}))
		defer srv.Close()
		_, err := (&HTTP{URL: srv.URL}).Complete(context.Background(), ask("q"))
		var rpc *RPCError
		if !errors.As(err, &rpc) || rpc.Message != "quota" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("id mismatch", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":0,"result":{"content":"x"}}`)
		}))
		defer srv.Close()
		_, err := (&HTTP{URL: srv.URL}).Complete(context.Background(), ask("q"))
		if err == nil || !strings.Contains(err.Error(), "transport fault") || !strings.Contains(err.Error(), "does not match") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("oversize response", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte(" "), MaxFrame+10))
		}))
		defer srv.Close()
		_, err := (&HTTP{URL: srv.URL}).Complete(context.Background(), ask("q"))
		if err == nil || !strings.Contains(err.Error(), "transport fault") || !strings.Contains(err.Error(), "exceeds") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("redirect not followed", func(t *testing.T) {
		var followed atomic.Bool
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				followed.Store(true)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}))
		defer srv.Close()
		_, err := (&HTTP{URL: srv.URL, Bearer: "b"}).Complete(context.Background(), ask("q"))
		if err == nil || !strings.Contains(err.Error(), "HTTP 307") || followed.Load() {
			t.Fatalf("err = %v, followed = %v", err, followed.Load())
		}
	})
	t.Run("slow server hits the deadline", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := (&HTTP{URL: srv.URL}).Complete(ctx, ask("q"))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "transport fault") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		_, err := (&HTTP{URL: url}).Complete(context.Background(), ask("q"))
		if err == nil || !strings.Contains(err.Error(), "transport fault") {
			t.Fatalf("err = %v", err)
		}
	})
}
