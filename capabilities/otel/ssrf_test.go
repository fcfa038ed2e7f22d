package otel

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/kilnworks/kiln/capabilities/internal/netguard/netguardtest"
	"github.com/kilnworks/kiln/capabilities/otel/otlptest"
)

// exportOne sends one span through the exporter cfg builds; wait bounds
// the export (gRPC retries an unreachable collector until then).
func exportOne(t *testing.T, cfg Config, wait time.Duration) error {
	t.Helper()
	exp, err := newExporter(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(context.Background())
	span := tracetest.SpanStub{Name: "probe", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})}.Snapshot()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return exp.ExportSpans(ctx, []sdktrace.ReadOnlySpan{span})
}

// TestExporterSSRFGuard: the collector endpoint names its host, so a name
// resolving to loopback is reached, while a name resolving to 0.0.0.0
// (the class of the metadata addresses; on Linux a connection to it
// reaches the loopback collector) is refused at the dial, for gRPC and
// HTTP alike: the collector receives nothing.
func TestExporterSSRFGuard(t *testing.T) {
	netguardtest.Resolve(t, map[string]string{"collector.kiln.test": "127.0.0.1", "metadata.kiln.test": "0.0.0.0"})
	for _, protocol := range []string{ProtocolGRPC, ProtocolHTTPProtobuf} {
		t.Run(protocol, func(t *testing.T) {
			var rec *otlptest.Receiver
			var port string
			if protocol == ProtocolGRPC {
				var addr string
				rec, addr = otlptest.NewGRPC(t, nil)
				_, port, _ = net.SplitHostPort(addr)
			} else {
				var base string
				rec, base = otlptest.NewHTTP(t, nil)
				port = base[strings.LastIndex(base, ":")+1:]
			}
			endpoint := func(host string) Config {
				if protocol == ProtocolGRPC {
					return Config{Protocol: protocol, Endpoint: "http://" + host + ":" + port}
				}
				return Config{Protocol: protocol, Endpoint: "http://" + host + ":" + port + TracesPath}
			}

			if err := exportOne(t, endpoint("collector.kiln.test"), 30*time.Second); err != nil || len(rec.Spans()) != 1 {
				t.Fatalf("collector by a name resolving to loopback: %v (%d spans)", err, len(rec.Spans()))
			}
			err := exportOne(t, endpoint("metadata.kiln.test"), 2*time.Second)
			if err == nil || !strings.Contains(err.Error(), "refusing to connect to unspecified (this network) address 0.0.0.0") {
				t.Fatalf("collector by a name resolving to 0.0.0.0: %v", err)
			}
			if n := len(rec.Spans()); n != 1 {
				t.Fatalf("the collector received %d spans, want only the first", n)
			}
		})
	}
}

// TestGRPCUnixEndpoint: a unix socket endpoint from the environment still
// works with the guarded dialer (a local socket is no network destination).
func TestGRPCUnixEndpoint(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "otlp.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, &countingCollector{spans: &got})
	go srv.Serve(lis)
	defer srv.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "unix://"+sock)

	if err := exportOne(t, Config{Protocol: ProtocolGRPC}, 30*time.Second); err != nil || got.Load() != 1 {
		t.Fatalf("unix endpoint: %v (%d spans)", err, got.Load())
	}
}

type countingCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	spans *atomic.Int64
}

func (c *countingCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans.Add(int64(len(ss.Spans)))
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// TestHTTPExporterClientCertificate: the HTTP exporter's own client keeps
// the SDK's TLS variables: the collector's CA from
// OTEL_EXPORTER_OTLP_CERTIFICATE and the client certificate from
// OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY (mutual TLS).
func TestHTTPExporterClientCertificate(t *testing.T) {
	serverTLS, caFile := selfSigned(t)
	certFile, keyFile, clientCA := clientCertificate(t)
	serverTLS.ClientAuth = tls.RequireAndVerifyClientCert
	serverTLS.ClientCAs = clientCA
	rec, base := otlptest.NewHTTP(t, serverTLS)
	cfg := Config{Protocol: ProtocolHTTPProtobuf, Endpoint: base + TracesPath}
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", caFile)

	if err := exportOne(t, cfg, 30*time.Second); err == nil {
		t.Fatal("export without a client certificate succeeded")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", certFile)
	t.Setenv("OTEL_EXPORTER_OTLP_CLIENT_KEY", keyFile)
	if err := exportOne(t, cfg, 30*time.Second); err != nil || len(rec.Spans()) != 1 {
		t.Fatalf("export with a client certificate: %v (%d spans)", err, len(rec.Spans()))
	}
}

// clientCertificate writes a self-signed client certificate and its key
// as PEM files and returns them with the pool that trusts it.
func clientCertificate(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "otel-test exporter"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
