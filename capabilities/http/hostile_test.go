package http

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHeaderLimit(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	ts.do(t, "POST", "/hook", `{}`, "X-Pad", strings.Repeat("a", 15<<10)).expect(t, 200)
	r := ts.do(t, "POST", "/hook", `{}`, "X-Pad", strings.Repeat("a", 17<<10)).expect(t, 431)
	if r.json["error"] != "request header fields too large" {
		t.Fatalf("body %s", r.body)
	}
	// Many small headers count too.
	req := mustRequest(t, "POST", ts.URL+"/hook", `{}`)
	for i := 0; i < 400; i++ {
		req.Header.Add("X-Many", strings.Repeat("b", 40))
	}
	ts.send(t, req).expect(t, 431)
	// Far beyond: net/http refuses before the handler runs.
	res, err := ts.Client.Do(func() *http.Request {
		r := mustRequest(t, "POST", ts.URL+"/hook", `{}`)
		r.Header.Set("X-Pad", strings.Repeat("c", 200<<10))
		return r
	}())
	if err == nil {
		res.Body.Close()
		if res.StatusCode != 431 {
			t.Fatalf("200 KiB header: status %d", res.StatusCode)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	// Exactly 1 MiB is accepted.
	exact := `"` + strings.Repeat("x", MaxBodyBytes-2) + `"`
	ts.do(t, "POST", "/hook", exact).expect(t, 200)
	// Declared too large: refused before reading a byte of it.
	got := raw(t, ts, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n")
	if !strings.HasPrefix(got, "HTTP/1.1 413") || !strings.Contains(got, `"error":"request body too large"`) {
		t.Fatalf("declared oversize body: %q", got)
	}
	// Chunked, no length: cut once 1 MiB has been read.
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		_, _ = io.WriteString(c, "POST /hook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
		chunk := "10000\r\n" + strings.Repeat("y", 0x10000) + "\r\n"
		for i := 0; i < 40; i++ {
			if _, err := io.WriteString(c, chunk); err != nil {
				return
			}
		}
	}()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("chunked oversize body: %d", res.StatusCode)
	}
}

// raw sends bytes on a fresh TCP connection and returns what the server
// answered before closing (or timeout).
func raw(t *testing.T, ts *testServer, payload string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestMalformedRequests(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	for name, payload := range map[string]string{
		"garbage line":    "GARBAGE\r\n\r\n",
		"no version":      "POST /hook\r\n\r\n",
		"bad version":     "POST /hook HTTP/9.9\r\nHost: x\r\n\r\n",
		"header no colon": "POST /hook HTTP/1.1\r\nHost: x\r\nBroken header\r\n\r\n",
		"bad length":      "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
		"two lengths":     "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
		"no host":         "POST /hook HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
		"space in target": "POST /ho ok HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		got := raw(t, ts, payload)
		if !strings.HasPrefix(got, "HTTP/1.1 400") && !strings.HasPrefix(got, "HTTP/1.1 505") {
			t.Errorf("%s: answered %q", name, firstLine(got))
		}
	}
	// A well-formed raw request still works on the same server.
	got := raw(t, ts, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
	if !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("valid raw request: %q", firstLine(got))
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\r\n")
	return l
}

func TestSlowClientsAreCut(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{cfg: Config{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond}})
	addr := strings.TrimPrefix(ts.URL, "http://")

	// Slowloris: headers trickle in, one line per 100ms, forever.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	begin := time.Now()
	_, _ = io.WriteString(c, "POST /hook HTTP/1.1\r\nHost: x\r\n")
	closed := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 1024)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				closed <- time.Since(begin)
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var cut time.Duration
loop:
	for {
		select {
		case cut = <-closed:
			break loop
		case <-tick.C:
			_, _ = io.WriteString(c, "X-Slow: a\r\n")
		}
	}
	if cut > 3*time.Second {
		t.Fatalf("slowloris connection lived %v", cut)
	}

	// Slow body: headers complete, body stalls.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	begin = time.Now()
	_, _ = io.WriteString(c2, "POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":")
	_ = c2.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("stalled body answered %d", resp.StatusCode)
		}
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("stalled body held the connection %v", d)
	}
	// The server still serves.
	ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
}

// TestLongRunOutlivesWriteTimeout: the write timeout guards slow
// readers of the reply, not the workflow; a run longer than it is still
// answered.
func TestLongRunOutlivesWriteTimeout(t *testing.T) {
	g := resetGate()
	ts := start(t, wf("block", ""), setup{cfg: Config{WriteTimeout: 200 * time.Millisecond}})
	go func() { time.Sleep(600 * time.Millisecond); close(g) }()
	r := ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	if r.at("final_value.released") != true {
		t.Fatalf("body %s", r.body)
	}
}

// TestReplyLengthOnTheWire: every reply carries its exact Content-Length
// and none goes out chunked, on either side of the size under which
// net/http sets the length itself (write leaves it to net/http there).
func TestReplyLengthOnTheWire(t *testing.T) {
	ts := start(t, `
name = "pad"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "r"
[[nodes]]
id = "r"
type = "respond"
content_type = "text/plain"
body_template = "{{pad}}"
[[http_routes]]
method = "POST"
path = "/pad"
start_node = "main"
`, setup{})
	for _, n := range []int{1, autoLengthMax - 1, autoLengthMax, 5000} {
		body := `{"pad":"` + strings.Repeat("x", n) + `"}`
		got := raw(t, ts, "POST /pad HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"+
			"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
		head, payload, _ := strings.Cut(got, "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 200 ") || !strings.Contains(head, "\r\nContent-Length: "+strconv.Itoa(n)+"\r\n") ||
			strings.Contains(head, "chunked") || payload != strings.Repeat("x", n) {
			t.Errorf("%d-byte reply:\n%s", n, head)
		}
	}
}
