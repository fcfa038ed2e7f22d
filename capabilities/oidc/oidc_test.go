package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	khttp "github.com/kilnworks/kiln/capabilities/http"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"

	_ "github.com/kilnworks/kiln/capabilities/control"
)

var b64 = base64.RawURLEncoding

// keys are generated once: RSA generation is the slow part.
var (
	keysOnce           sync.Once
	rsaKey1, rsaKey2   *rsa.PrivateKey
	ecKey256, ecKey384 *ecdsa.PrivateKey
	smallRSA           *rsa.PrivateKey
)

func testKeys(t *testing.T) {
	t.Helper()
	keysOnce.Do(func() {
		rsaKey1, _ = rsa.GenerateKey(rand.Reader, 2048)
		rsaKey2, _ = rsa.GenerateKey(rand.Reader, 2048)
		smallRSA, _ = rsa.GenerateKey(rand.Reader, 1024)
		ecKey256, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		ecKey384, _ = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	})
}

func rsaJWK(kid string, k *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig",
		"n": b64.EncodeToString(k.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]any {
	point, err := k.Bytes() // uncompressed: 0x04 || X || Y
	if err != nil {
		panic(err)
	}
	size := (len(point) - 1) / 2
	x, y := point[1:1+size], point[1+size:]
	return map[string]any{"kty": "EC", "kid": kid, "crv": k.Curve.Params().Name, "x": b64.EncodeToString(x), "y": b64.EncodeToString(y)}
}

func jwks(keys ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return string(b)
}

// mint signs a JWT with alg and key (nil key: unsigned).
func mint(t *testing.T, alg, kid string, key any, claims map[string]any) string {
	t.Helper()
	hdr := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		hdr["kid"] = kid
	}
	hb, _ := json.Marshal(hdr)
	cb, _ := json.Marshal(claims)
	signed := b64.EncodeToString(hb) + "." + b64.EncodeToString(cb)
	hashes := map[string]crypto.Hash{"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
		"ES256": crypto.SHA256, "ES384": crypto.SHA384, "HS256": crypto.SHA256}
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		h := hashes[alg].New()
		h.Write([]byte(signed))
		sig, _ = rsa.SignPKCS1v15(rand.Reader, k, hashes[alg], h.Sum(nil))
	case *ecdsa.PrivateKey:
		h := hashes[alg].New()
		h.Write([]byte(signed))
		r, s, err := ecdsa.Sign(rand.Reader, k, h.Sum(nil))
		if err != nil {
			t.Fatal(err)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	case []byte: // HMAC
		m := hmac.New(sha256.New, k)
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	}
	return signed + "." + b64.EncodeToString(sig)
}

func claims(over map[string]any) map[string]any {
	now := time.Now().Unix()
	c := map[string]any{"iss": "https://idp.example", "aud": "kiln-hooks", "sub": "svc-deploy",
		"exp": now + 300, "nbf": now - 10, "iat": now - 10}
	for k, v := range over {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// host builds a host whose workflow has one oidc binding and one route.
func host(t *testing.T, binding string, assets map[string][]byte) *runtime.Host {
	t.Helper()
	src := `
name = "oidc-hooks"
[[start_nodes]]
name = "main"
source = "http"
[[nodes]]
id = "reply"
type = "respond"
input_from = "trigger"
body_template = '{"kind":"{{principal.kind}}","sub":"{{principal.name}}"}'
[[http_routes]]
method = "POST"
path = "/deploy"
start_node = "main"
auth = "oidc:corp"
[auth.oidc.corp]
` + binding
	wf, err := gen.Decode("workflow.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wf.Assets = assets
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &runtime.Host{Program: p, Engine: &runtime.Engine{}}
}

func verifier(t *testing.T, binding string) *Verifier {
	t.Helper()
	v, err := newVerifier(host(t, binding, nil), "corp")
	if err != nil {
		t.Fatalf("newVerifier: %v", err)
	}
	return v.(*Verifier)
}

const base = `issuer = "https://idp.example"
audience = "kiln-hooks"
`

func TestVerifyTokens(t *testing.T) {
	testKeys(t)
	set := jwks(rsaJWK("r1", &rsaKey1.PublicKey), ecJWK("e256", &ecKey256.PublicKey), ecJWK("e384", &ecKey384.PublicKey))
	v := verifier(t, base+`algorithms = ["RS256", "RS384", "RS512", "ES256", "ES384"]
jwks_json = '`+set+`'
subject_allowlist = ["svc-deploy", "svc-ci"]
`)
	for _, c := range []struct {
		alg, kid string
		key      any
	}{
		{"RS256", "r1", rsaKey1}, {"RS384", "r1", rsaKey1}, {"RS512", "", rsaKey1},
		{"ES256", "e256", ecKey256}, {"ES384", "", ecKey384},
	} {
		sub, err := v.VerifyToken(mint(t, c.alg, c.kid, c.key, claims(nil)))
		if err != nil || sub != "svc-deploy" {
			t.Errorf("%s: sub %q err %v", c.alg, sub, err)
		}
	}
	now := time.Now().Unix()
	bad := map[string]struct {
		tok  string
		want string
	}{
		"alg none":           {mint(t, "none", "", nil, claims(nil)), `"none" is not accepted`},
		"HS256 with pub key": {mint(t, "HS256", "", rsaKey1.PublicKey.N.Bytes(), claims(nil)), `"HS256" is not accepted`},
		"unknown signer":     {mint(t, "RS256", "", rsaKey2, claims(nil)), "does not verify"},
		"kid of other key":   {mint(t, "ES256", "r1", ecKey256, claims(nil)), "does not verify"},
		"curve mismatch":     {mint(t, "ES384", "", ecKey256, claims(nil)), "does not verify"},
		"wrong issuer":       {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"iss": "https://evil.example"})), "issuer"},
		"wrong audience":     {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"aud": "other"})), "audience"},
		"expired":            {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"exp": now - 120})), "expired"},
		"no exp":             {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"exp": nil})), "no exp"},
		"string exp":         {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"exp": "tomorrow"})), "no exp"},
		"not yet valid":      {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"nbf": now + 600})), "nbf"},
		"subject not listed": {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"sub": "mallory"})), "allowlist"},
		"no subject":         {mint(t, "RS256", "", rsaKey1, claims(map[string]any{"sub": nil})), "no sub"},
		"two segments":       {"a.b", "compact JWS"},
		"garbage header":     {"!!!." + b64.EncodeToString([]byte("{}")) + ".sig", "header"},
	}
	// A tampered payload keeps the original signature.
	good := mint(t, "RS256", "r1", rsaKey1, claims(nil))
	parts := strings.Split(good, ".")
	evil, _ := json.Marshal(claims(map[string]any{"sub": "svc-ci"}))
	bad["tampered claims"] = struct{ tok, want string }{parts[0] + "." + b64.EncodeToString(evil) + "." + parts[2], "does not verify"}
	// A padded (non-strict) signature encoding.
	bad["padded signature"] = struct{ tok, want string }{good + "=", "base64url"}
	for name, c := range bad {
		if sub, err := v.VerifyToken(c.tok); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: sub %q err %v, want %q", name, sub, err, c.want)
		}
	}
	// Clock skew: expired 30s ago passes with the default 60s skew.
	if _, err := v.VerifyToken(mint(t, "RS256", "", rsaKey1, claims(map[string]any{"exp": now - 30, "aud": []string{"x", "kiln-hooks"}}))); err != nil {
		t.Errorf("within skew, audience array: %v", err)
	}
}

func TestDefaultAlgorithmIsRS256Only(t *testing.T) {
	testKeys(t)
	v := verifier(t, base+`jwks_json = '`+jwks(rsaJWK("r1", &rsaKey1.PublicKey), ecJWK("e", &ecKey256.PublicKey))+`'
clock_skew_secs = 0
`)
	if _, err := v.VerifyToken(mint(t, "RS256", "", rsaKey1, claims(nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := v.VerifyToken(mint(t, "ES256", "", ecKey256, claims(nil))); err == nil {
		t.Fatal("ES256 accepted without being configured")
	}
	if _, err := v.VerifyToken(mint(t, "RS256", "", rsaKey1, claims(map[string]any{"exp": time.Now().Unix() - 2}))); err == nil {
		t.Fatal("expired token accepted with zero skew")
	}
}

func TestBindingErrors(t *testing.T) {
	testKeys(t)
	good := jwks(rsaJWK("r1", &rsaKey1.PublicKey))
	priv := rsaJWK("p", &rsaKey1.PublicKey)
	priv["d"] = "AQAB"
	for binding, want := range map[string]string{
		base + `algorithms = ["HS256"]` + "\njwks_json = '" + good + "'": `algorithm "HS256" is not supported`,
		base + `algorithms = ["none"]` + "\njwks_json = '" + good + "'":  `algorithm "none" is not supported`,
		`audience = "a"` + "\njwks_json = '" + good + "'":                "issuer is required",
		base:                                  "jwks_file or jwks_json is required",
		base + `jwks_file = "keys/jwks.json"`: "was not loaded",
		base + `jwks_json = '{"keys":[]}'`:    `must be a JSON Web Key Set with a non-empty "keys" array`,
		base + `jwks_json = '` + jwks(rsaJWK("s", &smallRSA.PublicKey)) + `'`:          "below 2048",
		base + `jwks_json = '` + jwks(priv) + `'`:                                      "private key material",
		base + `jwks_json = '{"keys":[{"kty":"EC","crv":"P-256","x":"AQ","y":"AQ"}]}'`: "not on P-256",
		base + `jwks_json = 'nope'`:                                                    "must be a JSON Web Key Set",
	} {
		if _, err := newVerifier(host(t, binding, nil), "corp"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", binding, err, want)
		}
	}
	if _, err := newVerifier(host(t, base+`jwks_json = '`+good+`'`, nil), "other"); err == nil {
		t.Error("unknown binding accepted")
	}
}

// TestServeWithOIDC runs the real HTTP server with an oidc route: the
// JWKS comes from the workflow's loaded assets.
func TestServeWithOIDC(t *testing.T) {
	testKeys(t)
	h := host(t, base+`algorithms = ["ES256"]
jwks_file = "keys/jwks.json"
subject_allowlist = ["svc-deploy"]
`, map[string][]byte{"keys/jwks.json": []byte(jwks(ecJWK("k", &ecKey256.PublicKey)))})
	s, err := khttp.New(h, khttp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeListener(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	post := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/deploy", strings.NewReader(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	code, body := post(mint(t, "ES256", "k", ecKey256, claims(nil)))
	if code != 200 || body != `{"kind":"oidc","sub":"svc-deploy"}` {
		t.Fatalf("valid token: %d %s", code, body)
	}
	for _, tok := range []string{"", mint(t, "ES256", "k", ecKey256, claims(map[string]any{"sub": "svc-other"})),
		mint(t, "none", "", nil, claims(nil))} {
		if code, body := post(tok); code != 401 || !strings.Contains(body, `"error":"unauthorized"`) {
			t.Fatalf("token %q: %d %s", tok, code, body)
		}
	}
}
