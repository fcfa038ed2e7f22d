package otel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
)

// The exporters dial the collector through the SSRF guard. The endpoint
// is configured ([logging.otel] endpoint or the SDK's OTEL_EXPORTER_OTLP_*
// variables), so its host is a named host: a collector on loopback or a
// private address works, a name resolving to a link-local or metadata
// address is refused at the dial unless the endpoint is that IP literal.
// No proxy from the environment is used, by either protocol.

// grpcDialOption makes the gRPC exporter dial its one target through the
// guard. gRPC hands the dialer a resolved address, so the reach is fixed
// from the endpoint's host; a custom dialer also turns gRPC's proxy
// support off.
func grpcDialOption(cfg Config) grpc.DialOption {
	reach := netguard.NamedHost(endpointHost(cfg))
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		if path, ok := unixSocket(addr); ok {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		return netguard.Dialer().DialContext(netguard.WithReach(ctx, reach), "tcp", addr)
	})
}

// unixSocket is the socket of a unix target (unix:///abs, unix:rel, or an
// abstract name, as gRPC hands them to a custom dialer): a local socket
// the environment configured, not a network destination.
func unixSocket(addr string) (string, bool) {
	if strings.HasPrefix(addr, "\x00") {
		return addr, true
	}
	path, ok := strings.CutPrefix(addr, "unix:")
	return strings.TrimPrefix(path, "//"), ok
}

// endpointHost is the host the gRPC exporter dials: the configured
// endpoint's, else that of the SDK's variables (the per-signal one
// first); "" when neither names one (the SDK's default, localhost).
func endpointHost(cfg Config) string {
	raw := cfg.Endpoint
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if raw == "" {
			raw = env(name)
		}
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if host, _, err := net.SplitHostPort(raw); err == nil { // host:port without a scheme
		return host
	}
	return ""
}

// httpClient is the HTTP exporter's client over the guarded transport.
// The SDK has no dialer option, and a client given to it replaces its
// own along with the TLS and timeout settings it reads from the
// environment, so those are read here the way the SDK reads them: the
// per-signal variable after the general one, a file that does not load
// left out (the SDK reports it), timeouts in milliseconds, 10 s default.
func httpClient() *http.Client {
	t := netguard.NewTransport()
	conf := &tls.Config{}
	for _, prefix := range []string{"OTEL_EXPORTER_OTLP_", "OTEL_EXPORTER_OTLP_TRACES_"} {
		if pem, err := readEnvFile(prefix + "CERTIFICATE"); err == nil {
			if pool := x509.NewCertPool(); pool.AppendCertsFromPEM(pem) {
				conf.RootCAs = pool
			}
		}
		cert, certErr := readEnvFile(prefix + "CLIENT_CERTIFICATE")
		key, keyErr := readEnvFile(prefix + "CLIENT_KEY")
		if certErr == nil && keyErr == nil {
			if pair, err := tls.X509KeyPair(cert, key); err == nil {
				conf.Certificates = []tls.Certificate{pair}
			}
		}
	}
	if conf.RootCAs != nil || conf.Certificates != nil {
		t.TLSClientConfig = conf
	}
	timeout := 10 * time.Second
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		if ms, err := strconv.Atoi(env(name)); err == nil {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return &http.Client{Transport: t, Timeout: timeout}
}

// env is a variable's value as the SDK reads it, spaces trimmed.
func env(name string) string { return strings.TrimSpace(os.Getenv(name)) }

// readEnvFile reads the file an environment variable names.
func readEnvFile(name string) ([]byte, error) {
	path := env(name)
	if path == "" {
		return nil, os.ErrNotExist
	}
	return os.ReadFile(path)
}
