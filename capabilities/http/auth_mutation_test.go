package http

import (
	"strconv"
	"testing"
	"time"
)

// A timestamped HMAC signature is accepted exactly within its tolerance,
// on either side of the server's clock (300 s when the binding sets
// none), and refused one second outside it.
func TestHMACToleranceBoundaries(t *testing.T) {
	src := wf("echo", `auth = "hmac:narrow"
[[http_routes]]
method = "POST"
path = "/default"
start_node = "main"
auth = "hmac:wide"
[auth.hmac.narrow]
secret = "narrow-hmac-secret"
timestamp_header = "X-Timestamp"
tolerance_secs = 60
[auth.hmac.wide]
secret = "wide-hmac-secret"
timestamp_header = "X-Timestamp"
`)
	now := time.Unix(1_700_000_000, 0)
	h := newHost(t, src, setup{})
	h.Engine.Now = func() time.Time { return now }
	buf := &syncBuffer{}
	h.Engine.Audit = newTestAudit(buf)
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, false)
	body := `{"n":1}`
	send := func(path, secret string, offset int64) int {
		t.Helper()
		stamp := strconv.FormatInt(now.Unix()+offset, 10)
		return ts.do(t, "POST", path, body, "X-Timestamp", stamp,
			"X-Agent-Signature", "sha256="+sign(secret, stamp+"."+body)).code
	}
	for _, c := range []struct {
		path, secret string
		offset       int64
		want         int
	}{
		{"/hook", "narrow-hmac-secret", -60, 200},
		{"/hook", "narrow-hmac-secret", 60, 200},
		{"/hook", "narrow-hmac-secret", -61, 401},
		{"/hook", "narrow-hmac-secret", 61, 401},
		{"/default", "wide-hmac-secret", -300, 200},
		{"/default", "wide-hmac-secret", 300, 200},
		{"/default", "wide-hmac-secret", -301, 401},
		{"/default", "wide-hmac-secret", 301, 401},
	} {
		if got := send(c.path, c.secret, c.offset); got != c.want {
			t.Errorf("%s signed %+d s from the server's clock: status %d, want %d", c.path, c.offset, got, c.want)
		}
	}
}
