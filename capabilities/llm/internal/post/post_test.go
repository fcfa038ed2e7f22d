package post

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/capabilities/internal/netguard/netguardtest"
)

// backend is a loopback endpoint counting requests; it answers {}.
func backend(t *testing.T) (port string, hits *atomic.Int64) {
	t.Helper()
	hits = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return port, hits
}

// TestNoProxyFromEnvironment: HTTP_PROXY does not divert a backend call
// (a proxy would dial the backend itself, out of the guard's sight). This
// test comes first in the package: net/http reads the proxy variables
// once per process.
func TestNoProxyFromEnvironment(t *testing.T) {
	port, hits := backend(t)
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	netguardtest.Resolve(t, map[string]string{"backend.kiln.test": "127.0.0.1"})

	if _, err := JSON(context.Background(), "http://backend.kiln.test:"+port+"/v1", nil, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 || proxied.Load() != 0 {
		t.Fatalf("backend hits %d, proxy hits %d: want the backend reached directly", hits.Load(), proxied.Load())
	}
}

// TestSSRFGuard: a backend URL names its host, so a name resolving to
// loopback is reached, while a name resolving to 0.0.0.0 (the class of
// the metadata addresses; on Linux a connection to it reaches the
// loopback backend) is refused at the dial.
func TestSSRFGuard(t *testing.T) {
	port, hits := backend(t)
	netguardtest.Resolve(t, map[string]string{"backend.kiln.test": "127.0.0.1", "metadata.kiln.test": "0.0.0.0"})

	if _, err := JSON(context.Background(), "http://backend.kiln.test:"+port+"/v1", nil, []byte("{}")); err != nil || hits.Load() != 1 {
		t.Fatalf("backend by a name resolving to loopback: %v (hits %d)", err, hits.Load())
	}
	_, err := JSON(context.Background(), "http://metadata.kiln.test:"+port+"/v1", nil, []byte("{}"))
	var blocked *netguard.Blocked
	if !errors.As(err, &blocked) || !blocked.LiteralOnly || hits.Load() != 1 {
		t.Fatalf("backend by a name resolving to 0.0.0.0: %v (hits %d)", err, hits.Load())
	}
	if !strings.Contains(err.Error(), "transport fault: POST: ") || !strings.Contains(err.Error(), "refusing to connect to unspecified (this network) address 0.0.0.0") {
		t.Fatalf("error text %q", err)
	}
}
