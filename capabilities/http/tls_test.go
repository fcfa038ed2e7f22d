package http

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pki is a throwaway certificate authority.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial int64 = 100

func newCA(t *testing.T, name string) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf; server leaves get 127.0.0.1 as SAN.
func (ca *pki) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte, tc tls.Certificate) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	tc, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, tc
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func tlsClient(ts *testServer, roots *x509.CertPool, cert *tls.Certificate) {
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	ts.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}, Timeout: 20 * time.Second}
}

func TestMTLS(t *testing.T) {
	dir := t.TempDir()
	ca, clientCA, rogue := newCA(t, "server-ca"), newCA(t, "client-ca"), newCA(t, "rogue-ca")
	sc, sk, _ := ca.issue(t, "server", true)
	writeFile(t, filepath.Join(dir, "server.pem"), sc)
	writeFile(t, filepath.Join(dir, "server.key"), sk)
	writeFile(t, filepath.Join(dir, "clients.pem"), clientCA.pem)
	_, _, good := clientCA.issue(t, "agent-1", false)
	_, _, bad := rogue.issue(t, "intruder", false)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	// Relative paths resolve against the workflow file's directory.
	src := wf("echo", `auth = "mtls"
[server.tls]
cert_file = "server.pem"
key_file = "server.key"
[server.tls.client_auth]
mode = "required"
ca_file = "clients.pem"
`)
	h := newHost(t, src, setup{})
	h.Program.Workflow.Source = filepath.Join(dir, "workflow.toml")
	buf := &syncBuffer{}
	h.Engine.Audit = newTestAudit(buf)
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, true)

	tlsClient(ts, roots, &good)
	r := ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	sum := sha256.Sum256(good.Leaf.Raw)
	if r.at("final_value.trigger.principal.kind") != "mtls" || r.at("final_value.trigger.principal.name") != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("principal: %s", r.body)
	}
	if r.tls == nil || r.tls.NegotiatedProtocol == "h2" {
		t.Fatalf("want HTTP/1.1 over TLS, got %+v", r.tls)
	}

	for name, cert := range map[string]*tls.Certificate{"no client cert": nil, "rogue CA": &bad} {
		tlsClient(ts, roots, cert)
		req := mustRequest(t, "POST", ts.URL+"/hook", `{}`)
		if _, err := ts.sendErr(req); err == nil {
			t.Fatalf("%s: request succeeded", name)
		}
	}
	waitFor(t, func() bool { return strings.Contains(buf.String(), "tls.handshake_failed") })

	// Plain HTTP on a TLS port gets nothing useful.
	if got := raw(t, &testServer{URL: "http://" + strings.TrimPrefix(ts.URL, "https://")}, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); strings.Contains(got, `"status":"ok"`) {
		t.Fatalf("plain HTTP served on the TLS port: %q", got)
	}
}

func TestTLSReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "server-ca")
	certPath, keyPath := filepath.Join(dir, "s.pem"), filepath.Join(dir, "s.key")
	c1, k1, _ := ca.issue(t, "first", true)
	writeFile(t, certPath, c1)
	writeFile(t, keyPath, k1)
	ts := start(t, wf("echo", `
[server.tls]
cert_file = "`+certPath+`"
key_file = "`+keyPath+`"
`), setup{tls: true})
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	tlsClient(ts, roots, nil)
	keep := ts.Client // its idle connection predates the reload
	r := ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	if cn := r.tls.PeerCertificates[0].Subject.CommonName; cn != "first" {
		t.Fatalf("served %q", cn)
	}

	c2, k2, _ := ca.issue(t, "second", true)
	writeFile(t, certPath, c2)
	writeFile(t, keyPath, k2)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(ts.Audit.String(), "http.reloaded") })

	// The open keep-alive connection survives the reload ...
	ts.Client = keep
	r = ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	if r.tls.PeerCertificates[0].Subject.CommonName != "first" {
		t.Fatalf("old connection was replaced: %q", r.tls.PeerCertificates[0].Subject.CommonName)
	}
	// ... and new connections get the new certificate.
	tlsClient(ts, roots, nil)
	r = ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
	if cn := r.tls.PeerCertificates[0].Subject.CommonName; cn != "second" {
		t.Fatalf("after reload served %q", cn)
	}

	// A broken key file on reload keeps the current certificate.
	writeFile(t, keyPath, []byte("garbage"))
	if err := ts.Reload(); err == nil {
		t.Fatal("reload with a broken key succeeded")
	}
	tlsClient(ts, roots, nil)
	ts.do(t, "POST", "/hook", `{}`).expect(t, 200)
}

// A generated program enables TLS only when its workflow declares
// [server.tls] (as capabilities/all does for kiln run); these tests serve
// TLS, so they enable it.
func init() { EnableTLS() }

// TestTLSRefusedWithoutSupport: a workflow declaring [server.tls] in a
// program that did not link TLS support is refused at start, never
// served in plain HTTP.
func TestTLSRefusedWithoutSupport(t *testing.T) {
	dir := t.TempDir()
	c, k, _ := newCA(t, "ca").issue(t, "s", true)
	writeFile(t, filepath.Join(dir, "c.pem"), c)
	writeFile(t, filepath.Join(dir, "k.pem"), k)
	h := newHost(t, wf("echo", "\n[server.tls]\ncert_file = \""+dir+"/c.pem\"\nkey_file = \""+dir+"/k.pem\"\n"), setup{})
	if _, err := New(h, Config{}); err != nil {
		t.Fatalf("positive control: with TLS support: %v", err)
	}
	enabled := newTLS
	newTLS = nil
	defer func() { newTLS = enabled }()
	if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), "built without TLS support") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "ca")
	c, k, _ := ca.issue(t, "s", true)
	writeFile(t, filepath.Join(dir, "c.pem"), c)
	writeFile(t, filepath.Join(dir, "k.pem"), k)
	writeFile(t, filepath.Join(dir, "empty.pem"), []byte("nothing here"))
	for tail, want := range map[string]string{
		`cert_file = "` + dir + `/c.pem"`: "needs cert_file and key_file",
		`cert_file = "` + dir + `/missing.pem"
key_file = "` + dir + `/k.pem"`: "no such file",
		`cert_file = "` + dir + `/c.pem"
key_file = "` + dir + `/k.pem"
[server.tls.client_auth]
mode = "optional"
ca_file = "` + dir + `/c.pem"`: `only "required"`,
		`cert_file = "` + dir + `/c.pem"
key_file = "` + dir + `/k.pem"
[server.tls.client_auth]
mode = "required"
ca_file = "` + dir + `/empty.pem"`: "holds no PEM certificate",
	} {
		h := newHost(t, wf("echo", "\n[server.tls]\n"+tail+"\n"), setup{})
		if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", tail, err, want)
		}
	}
}
