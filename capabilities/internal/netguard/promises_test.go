package netguard

import (
	"testing"
	"time"
)

// Every guarded connection is bounded in time: a dial, a TLS handshake
// and an idle pooled connection each have a limit (a zero would mean
// none), and the dialer and transport never use a proxy, which would
// connect on kiln's behalf where Control cannot see the address.
func TestGuardedConnectionsAreBounded(t *testing.T) {
	d := Dialer()
	if d.Timeout != 10*time.Second || d.KeepAlive != 30*time.Second || d.ControlContext == nil {
		t.Errorf("dialer: timeout %v, keep-alive %v, guarded %v", d.Timeout, d.KeepAlive, d.ControlContext != nil)
	}
	tr := NewTransport()
	if tr.Proxy != nil {
		t.Error("the transport uses a proxy")
	}
	if tr.TLSHandshakeTimeout != 10*time.Second || tr.IdleConnTimeout != 90*time.Second || tr.ExpectContinueTimeout != time.Second {
		t.Errorf("transport: TLS handshake %v, idle %v, expect-continue %v", tr.TLSHandshakeTimeout, tr.IdleConnTimeout, tr.ExpectContinueTimeout)
	}
}
