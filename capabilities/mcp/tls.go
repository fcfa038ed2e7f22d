package mcp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"

	"github.com/kilnworks/kiln/capabilities/internal/netguard"
	"github.com/kilnworks/kiln/capabilities/internal/wfpath"
)

// serverTransport is the transport of a url server's connection: the
// shared one, or for a server with a tls table its own guarded transport
// carrying the client certificate and CAs, read when the server starts
// (a renewed certificate is picked up on the next start).
func serverTransport(s Server) (http.RoundTripper, error) {
	if s.TLS == nil {
		return httpTransport, nil
	}
	where := fmt.Sprintf("[[mcp_servers]] %q: tls", s.Name)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.TLS.CertFile != "" {
		cert, key := wfpath.Resolve(s.Dir, s.TLS.CertFile), wfpath.Resolve(s.Dir, s.TLS.KeyFile)
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			// The error of LoadX509KeyPair names files and PEM problems,
			// never key material.
			return nil, fmt.Errorf("%s: cert_file %s, key_file %s: %v", where, cert, key, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if s.TLS.CAFile != "" {
		ca := wfpath.Resolve(s.Dir, s.TLS.CAFile)
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: ca_file: %v", where, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: ca_file %s holds no PEM certificate", where, ca)
		}
		cfg.RootCAs = roots
	}
	t := netguard.NewTransport()
	t.TLSClientConfig = cfg
	return t, nil
}
