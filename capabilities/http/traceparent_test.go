package http

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/httpclient"
)

// TestTraceparentReachesOutboundHTTP: a webhook's traceparent header is
// forwarded by the http_request nodes of the run it starts.
func TestTraceparentReachesOutboundHTTP(t *testing.T) {
	var got atomic.Value
	got.Store("")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Traceparent"))
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}
	go func() { _ = upstream.Serve(ln) }()
	defer upstream.Close()
	url := "http://" + ln.Addr().String() + "/notify"

	ts := start(t, `
name = "relay"
[[start_nodes]]
name = "main"
[[nodes]]
id = "notify"
type = "http_request"
method = "GET"
url_from = "trigger.url"
[[http_routes]]
method = "POST"
path = "/hook"
start_node = "main"
[policy]
http = { urls = ["`+url+`"] }
`, setup{})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := ts.do(t, "POST", "/hook", `{"url":"`+url+`"}`, "traceparent", tp).expect(t, 200)
	if got.Load() != tp {
		t.Fatalf("upstream saw traceparent %q (reply %s)", got.Load(), r.body)
	}
	// Without the header nothing is invented.
	got.Store("unset")
	ts.do(t, "POST", "/hook", `{"url":"`+url+`"}`).expect(t, 200)
	if got.Load() != "" {
		t.Fatalf("upstream saw traceparent %q without one", got.Load())
	}
}
