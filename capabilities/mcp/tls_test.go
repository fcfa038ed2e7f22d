package mcp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kmcp "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// testCA issues certificates for the mTLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

// client writes a client certificate and its key signed by ca as PEM
// files in dir.
func (ca *testCA) client(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertificate: an MCP server demanding a client certificate
// signed by its CA is reached with tls.cert_file/key_file, trusted
// through tls.ca_file; without a certificate, or with one from another
// CA, the start fails; without ca_file the server's certificate is not
// trusted.
func TestClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "clients")
	ts := httptest.NewUnstartedServer(statefulHTTP(newTestServer(filepath.Join(dir, "calls.jsonl"))))
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	ts.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	ts.StartTLS()
	t.Cleanup(ts.Close)
	serverCA := filepath.Join(dir, "server-ca.pem")
	writePEM(t, serverCA, "CERTIFICATE", ts.Certificate().Raw)

	cert, key := ca.client(t, dir, "kiln")
	strangerCert, strangerKey := newTestCA(t, "strangers").client(t, dir, "stranger")

	for _, tc := range []struct {
		name string
		tls  *workflow.MCPTLS
		want string // "" = the call works
	}{
		{"client certificate", &workflow.MCPTLS{CertFile: cert, KeyFile: key, CAFile: serverCA}, ""},
		{"relative paths", &workflow.MCPTLS{CertFile: "kiln.crt", KeyFile: "kiln.key", CAFile: "server-ca.pem"}, ""},
		{"no client certificate", &workflow.MCPTLS{CAFile: serverCA}, "certificate required"},
		// The client holds back a certificate the server's CA list does not name.
		{"certificate of another CA", &workflow.MCPTLS{CertFile: strangerCert, KeyFile: strangerKey, CAFile: serverCA}, "certificate required"},
		{"server not trusted", &workflow.MCPTLS{CertFile: cert, KeyFile: key}, "certificate signed by unknown authority"},
		{"missing key file", &workflow.MCPTLS{CertFile: cert, KeyFile: filepath.Join(dir, "nope.key"), CAFile: serverCA}, "key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := kmcp.Server{Name: "secure", URL: ts.URL + "/mcp", AllowTools: []string{"echo"}, TLS: tc.tls, Dir: dir}
			p, _ := newAuthPool(t, s, nil)
			res, err := callEcho(p, "secure")
			switch {
			case tc.want == "" && (err != nil || !strings.Contains(jsonText(res), "echo: hi")):
				t.Fatalf("got %v, %v", res, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestTLSValidation: tls needs an https url server and cert_file with
// key_file.
func TestTLSValidation(t *testing.T) {
	for _, tc := range []struct{ server, want string }{
		{`url = "http://127.0.0.1:9/mcp"` + "\ntls = { ca_file = \"ca.pem\" }", "tls needs an https url"},
		{`url = "https://127.0.0.1:9/mcp"` + "\ntls = { cert_file = \"c.pem\" }", "cert_file and key_file go together"},
		{`command = ["/bin/true"]` + "\ntls = { ca_file = \"ca.pem\" }", "tls applies to url servers only"},
	} {
		src := strings.Replace(httpWorkflow("X", "echo"), `url = "X"`, tc.server, 1)
		_, err := newHost(t, src)
		if err == nil {
			h, _ := newHost(t, src)
			err = kmcp.Validate(h.Program.Workflow)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.server, err, tc.want)
		}
	}
}
