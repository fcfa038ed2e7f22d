package otel

import (
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
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/otel/otlptest"
	"github.com/kilnworks/kiln/runtime/cli"
)

// selfSigned returns a server TLS config for 127.0.0.1 and the PEM file
// of its certificate (the trust anchor a client needs).
func selfSigned(t *testing.T) (*tls.Config, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "otel-test collector"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "collector.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, path
}

// TestTLSEndpoints: an https:// endpoint is TLS for grpc and HTTP alike,
// verified against OTEL_EXPORTER_OTLP_CERTIFICATE (the SDK's variable);
// without that trust anchor the export fails (and is reported), the run
// does not.
func TestTLSEndpoints(t *testing.T) {
	for _, protocol := range []string{ProtocolGRPC, ProtocolHTTPProtobuf} {
		t.Run(protocol, func(t *testing.T) {
			cfg, caFile := selfSigned(t)
			var rec *otlptest.Receiver
			var endpoint string
			if protocol == ProtocolGRPC {
				var addr string
				rec, addr = otlptest.NewGRPC(t, cfg)
				endpoint = "https://" + addr
			} else {
				rec, endpoint = otlptest.NewHTTP(t, cfg)
			}
			tg := newTarget(t)
			wf := fetchWorkflow(t, tg, otelBlock(endpoint, protocol, ""))

			// Untrusted: nothing arrives, the failure is logged, the run is fine.
			old := shutdownTimeout
			shutdownTimeout = time.Second
			t.Cleanup(func() { shutdownTimeout = old })
			r := runCLI(t, wf, map[string]any{"url": tg.URL})
			if r.code != cli.ExitOK || len(rec.Spans()) != 0 {
				t.Fatalf("untrusted collector: exit %d, %d spans\n%s", r.code, len(rec.Spans()), r.stderr)
			}
			// HTTP gives up on the certificate error at once; gRPC retries
			// it as unavailable until Close's bound.
			if !strings.Contains(r.stderr, `"msg":"otel.export_failed"`) && !strings.Contains(r.stderr, `"msg":"extension.close_failed"`) {
				t.Errorf("the TLS failure is not reported:\n%s", r.stderr)
			}

			t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", caFile)
			r = runCLI(t, wf, map[string]any{"url": tg.URL})
			if r.code != cli.ExitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if spans := rec.Spans(); len(spans) != 4 {
				t.Fatalf("over TLS: %d spans\n%s", len(spans), r.stderr)
			}
		})
	}
}
