package httpclient

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// 2xx, all of it, is the success branch; 300 (redirects are not followed)
// and above is the error branch.
func TestStatusRangeBoundaries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	}))
	defer srv.Close()
	p := program(t, wf("GET", allow(srv.URL), ""))
	for code, branch := range map[int]any{200: nil, 299: nil, 300: "error", 404: "error"} {
		r := run(t, p, map[string]any{"url": srv.URL + "/?code=" + strconv.Itoa(code)}, runtime.RunOptions{})
		if r.out["status"] != json.Number(strconv.Itoa(code)) || r.branch != branch {
			t.Errorf("status %d: branch %v, output %v", code, r.branch, r.out)
		}
	}
}

// A request body of exactly the cap is sent whole.
func TestRequestBodyOfExactlyTheCap(t *testing.T) {
	got := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- len(b)
	}))
	defer srv.Close()
	p := program(t, wf("POST", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL, "body": strings.Repeat("b", MaxBody)}, runtime.RunOptions{})
	if r.rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("1 MiB body refused: %+v", r.rep.Outcome)
	}
	if n := <-got; n != MaxBody {
		t.Fatalf("server received %d bytes, want %d", n, MaxBody)
	}
}

// A failed exchange names the cause once, after the method and URL, not
// wrapped a second time in net/http's own `Get "URL": ...` form.
func TestTransportErrorNamesTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	p := program(t, wf("GET", allow(url), ""))
	r := run(t, p, map[string]any{"url": url}, runtime.RunOptions{})
	reason := r.rep.Outcome.Reason
	if !strings.Contains(reason, "GET "+url+": dial tcp") || !strings.Contains(reason, "connection refused") || strings.Contains(reason, `Get "`) {
		t.Fatalf("reason %q", reason)
	}
}

// The outbound client bounds the TLS handshake, idle connections and
// response headers, uses no proxy and no TLS below 1.2.
func TestClientIsBounded(t *testing.T) {
	tr := newClient(nil).Transport.(*http.Transport)
	if tr.Proxy != nil || tr.TLSClientConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("proxy %v, TLS min %x", tr.Proxy != nil, tr.TLSClientConfig.MinVersion)
	}
	if tr.TLSHandshakeTimeout != 10*time.Second || tr.IdleConnTimeout != 90*time.Second || tr.MaxResponseHeaderBytes != 256<<10 {
		t.Errorf("TLS handshake %v, idle %v, header bytes %d", tr.TLSHandshakeTimeout, tr.IdleConnTimeout, tr.MaxResponseHeaderBytes)
	}
}

// What recording and replay see of a request names a header's secrets
// by placeholder, never by value, and keeps its plain text as written.
func TestRecordedRequestHoldsNoSecretValue(t *testing.T) {
	h, err := parseHeader("Authorization", "Bearer {{secret:API_TOKEN}}")
	if err != nil {
		t.Fatal(err)
	}
	got := recordedRequest("GET", "https://api.example.com/x", nil, []header{h})
	hs, _ := got["headers"].(map[string]any)
	if hs["Authorization"] != "Bearer {{secret:API_TOKEN}}" {
		t.Fatalf("recorded headers %v", hs)
	}
}
