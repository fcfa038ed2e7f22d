package http

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/kilnworks/kiln/capabilities/internal/wfpath"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// tlsServer serves [server.tls]: it wraps the listener, and load
// re-reads the material (SIGHUP).
type tlsServer interface {
	listener(net.Listener) net.Listener
	load() error
}

// newTLS is newTLSState once EnableTLS ran, else nil. Through it, the
// TLS server (handshakes, key parsing, signatures: about 370 KB of code)
// is linked only into programs that call EnableTLS.
var newTLS func(*workflow.Workflow) (tlsServer, error)

// EnableTLS links [server.tls] support. The generated program calls it
// when its workflow declares [server.tls], capabilities/all for kiln run.
func EnableTLS() { newTLS = newTLSState }

// newTLSServer returns nil when the workflow has no [server.tls]. A
// workflow that declares it in a program that did not call EnableTLS is
// refused, never served in plain HTTP.
func newTLSServer(wf *workflow.Workflow) (tlsServer, error) {
	if wf.Server == nil || wf.Server.TLS == nil {
		return nil, nil
	}
	if newTLS == nil {
		return nil, errors.New("[server.tls] is declared, but this binary was built without TLS support (http.EnableTLS): build it again with kiln build or go generate")
	}
	return newTLS(wf)
}

// tlsState holds the [server.tls] material. It is re-read on SIGHUP;
// each handshake picks up the latest config, so rotating a certificate
// never drops an open connection.
type tlsState struct {
	certFile, keyFile, caFile string
	current                   atomic.Pointer[tls.Config]
}

func newTLSState(wf *workflow.Workflow) (tlsServer, error) {
	t := wf.Server.TLS
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("[server.tls] needs cert_file and key_file")
	}
	s := &tlsState{certFile: resolvePath(wf, t.CertFile), keyFile: resolvePath(wf, t.KeyFile)}
	if ca := t.ClientAuth; ca != nil {
		if ca.Mode != "required" {
			return nil, fmt.Errorf("[server.tls.client_auth] mode %q is not supported: only \"required\"", ca.Mode)
		}
		if ca.CAFile == "" {
			return nil, errors.New("[server.tls.client_auth] needs ca_file")
		}
		s.caFile = resolvePath(wf, ca.CAFile)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the certificate, key and client CA and swaps them in; on
// error the previous material stays in force.
func (s *tlsState) load() error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("[server.tls]: %v", err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"}, // HTTP/1.1 only, like the reference
	}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return fmt.Errorf("[server.tls.client_auth]: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("[server.tls.client_auth]: %s holds no PEM certificate", s.caFile)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = pool
	}
	s.current.Store(cfg)
	return nil
}

// listener serves TLS on ln with a config that defers to the latest
// loaded one.
func (s *tlsState) listener(ln net.Listener) net.Listener {
	return tls.NewListener(ln, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.current.Load(), nil
		},
	})
}

// resolvePath resolves a path declared in the workflow (docs/serve.md).
func resolvePath(wf *workflow.Workflow, p string) string {
	dir := ""
	if wf.Source != "" {
		dir = filepath.Dir(wf.Source)
	}
	return wfpath.Resolve(dir, p)
}
