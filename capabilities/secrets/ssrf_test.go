package secrets

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/netguard/netguardtest"
)

// acceptCounter is a TCP listener on 127.0.0.1 that counts connections
// and closes them: a refusal with no accept is the guard's, not a dead
// port's.
func acceptCounter(t *testing.T) (port string, accepts *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepts
}

// TestTokenURLSSRFGuard: a token_url whose host resolves to 0.0.0.0 (the
// class of cloud metadata addresses; on Linux a connection to it reaches
// the loopback listener) is refused at the dial, before any connection.
// The loopback token endpoints of the other tests show a named host still
// reaches loopback.
func TestTokenURLSSRFGuard(t *testing.T) {
	t.Setenv("KILN_SECRETS_TEST_CID", "my-client")
	t.Setenv("KILN_SECRETS_TEST_CSECRET", "client-secret-xyz")
	port, accepts := acceptCounter(t)
	netguardtest.Resolve(t, map[string]string{"metadata.kiln.test": "0.0.0.0"})

	reg, err := New(decode(t, oauthTOML("https://metadata.kiln.test:"+port, "body", 60)), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = reg.Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "refusing to connect to unspecified (this network) address 0.0.0.0") {
		t.Fatalf("token_url resolving to 0.0.0.0: %v", err)
	}
	if n := accepts.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
}
