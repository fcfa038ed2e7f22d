package netguard_test

import (
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

// TestTransportNamesTheConfiguredHost: a URL the client is handed names
// its host. A name resolving to loopback is reached; a name resolving to
// 0.0.0.0 (the class of the metadata addresses, which on Linux would reach
// the loopback server) is refused at the dial; the 0.0.0.0 literal itself
// is reached, since the URL names it.
func TestTransportNamesTheConfiguredHost(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	netguardtest.Resolve(t, map[string]string{"backend.kiln.test": "127.0.0.1", "metadata.kiln.test": "0.0.0.0"})
	client := &http.Client{Transport: netguard.NewTransport()}
	defer client.CloseIdleConnections()

	get := func(url string) error {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("http://backend.kiln.test:" + port + "/"); err != nil || hits.Load() != 1 {
		t.Fatalf("name resolving to loopback: %v (hits %d)", err, hits.Load())
	}
	err := get("http://metadata.kiln.test:" + port + "/")
	var blocked *netguard.Blocked
	if !errors.As(err, &blocked) || !blocked.LiteralOnly || hits.Load() != 1 {
		t.Fatalf("name resolving to 0.0.0.0: %v (hits %d)", err, hits.Load())
	}
	if err := get("http://0.0.0.0:" + port + "/"); err != nil || hits.Load() != 2 {
		t.Fatalf("the 0.0.0.0 literal, named by the URL: %v (hits %d)", err, hits.Load())
	}
}

// TestTransportRedirectElsewhereIsPublic: a redirect to another host does
// not inherit the named reach (that host was not configured), so a
// redirect to a loopback name is refused; one back to the configured host
// is followed.
func TestTransportRedirectElsewhereIsPublic(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	netguardtest.Resolve(t, map[string]string{"backend.kiln.test": "127.0.0.1", "other.kiln.test": "127.0.0.1"})
	client := &http.Client{Transport: netguard.NewTransport()}
	defer client.CloseIdleConnections()

	base := "http://backend.kiln.test:" + port
	resp, err := client.Get(base + "/?to=" + base + "/same")
	if err != nil || hits.Load() != 2 {
		t.Fatalf("redirect to the configured host: %v (hits %d)", err, hits.Load())
	}
	resp.Body.Close()
	_, err = client.Get(base + "/?to=http://other.kiln.test:" + port + "/")
	var blocked *netguard.Blocked
	if !errors.As(err, &blocked) || blocked.LiteralOnly || !strings.Contains(err.Error(), "loopback") || hits.Load() != 3 {
		t.Fatalf("redirect to another host: %v (hits %d)", err, hits.Load())
	}
}
