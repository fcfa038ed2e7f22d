package oidc

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	_ "crypto/sha256" // registers SHA-256 for crypto.Hash
	_ "crypto/sha512" // registers SHA-384 and SHA-512
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"time"

	khttp "github.com/kilnworks/kiln/capabilities/http"
	oidcspec "github.com/kilnworks/kiln/capabilities/oidc/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	khttp.RegisterAuthKind(khttp.AuthKind{Name: "oidc", New: newVerifier})
}

// algorithms kiln verifies, with their hash and key type.
var algorithms = map[string]struct {
	hash  crypto.Hash
	ec    bool
	curve string // EC only
}{
	"RS256": {hash: crypto.SHA256},
	"RS384": {hash: crypto.SHA384},
	"RS512": {hash: crypto.SHA512},
	"ES256": {hash: crypto.SHA256, ec: true, curve: "P-256"},
	"ES384": {hash: crypto.SHA384, ec: true, curve: "P-384"},
}

// Verifier checks OIDC bearer tokens for one [auth.oidc.<name>] binding.
type Verifier struct {
	issuer   string
	audience string
	algs     map[string]bool
	keys     []key
	subjects map[string]bool // empty: any subject
	skew     time.Duration
	now      func() time.Time
}

func newVerifier(h *runtime.Host, binding string) (khttp.Verifier, error) {
	var cfg workflow.OIDCAuth
	ok := false
	if a := h.Program.Workflow.Auth; a != nil {
		cfg, ok = a.OIDC[binding]
	}
	if !ok {
		return nil, fmt.Errorf("no [auth.oidc.%s] binding", binding)
	}
	// The binding's static rules are the generator's (capabilities/oidc/spec).
	if err := spec.Err(oidcspec.CheckBinding(h.Program.Workflow.Auth, binding, spec.ForWorkflow(h.Program.Workflow))); err != nil {
		return nil, err
	}
	jwks := []byte(cfg.JWKSJSON)
	if cfg.JWKSFile != "" {
		jwks = h.Program.Workflow.Assets[cfg.JWKSFile] // present: checked above
	}
	keys, err := parseJWKS(jwks)
	if err != nil {
		return nil, err
	}
	v := &Verifier{issuer: cfg.Issuer, audience: cfg.Audience, algs: map[string]bool{}, keys: keys,
		subjects: map[string]bool{}, skew: 60 * time.Second, now: time.Now}
	if h.Engine.Now != nil {
		v.now = h.Engine.Now
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = []string{"RS256"}
	}
	for _, a := range algs {
		if _, ok := algorithms[a]; !ok { // the spec lists one this family cannot verify: fail closed
			return nil, fmt.Errorf("algorithm %q has no verifier", a)
		}
		v.algs[a] = true
	}
	if s := cfg.ClockSkewSecs; s != nil {
		v.skew = time.Duration(*s) * time.Second
	}
	for _, s := range cfg.SubjectAllowlist {
		v.subjects[s] = true
	}
	return v, nil
}

// Verify implements khttp.Verifier: the principal name is the token's
// subject.
func (v *Verifier) Verify(r *http.Request, _ []byte) (string, error) {
	tok, ok := khttp.BearerToken(r)
	if !ok {
		return "", errors.New("missing bearer token")
	}
	return v.VerifyToken(tok)
}

// VerifyToken checks a compact JWS: algorithm, signature, then claims.
func (v *Verifier) VerifyToken(tok string) (string, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", errors.New("token is not a compact JWS")
	}
	var hdr struct {
		Alg  string `json:"alg"`
		Kid  string `json:"kid"`
		Crit []any  `json:"crit"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return "", fmt.Errorf("token header: %v", err)
	}
	if !v.algs[hdr.Alg] {
		return "", fmt.Errorf("token algorithm %q is not accepted", hdr.Alg)
	}
	if hdr.Crit != nil {
		return "", errors.New("token header has critical extensions")
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil {
		return "", errors.New("token signature is not base64url")
	}
	if !v.checkSignature(hdr.Alg, hdr.Kid, []byte(parts[0]+"."+parts[1]), sig) {
		return "", errors.New("token signature does not verify")
	}
	var claims map[string]any
	if err := decodeSegment(parts[1], &claims); err != nil {
		return "", fmt.Errorf("token claims: %v", err)
	}
	return v.checkClaims(claims)
}

func (v *Verifier) checkSignature(alg, kid string, signed, sig []byte) bool {
	a := algorithms[alg]
	hf := a.hash.New()
	hf.Write(signed)
	digest := hf.Sum(nil)
	for _, k := range v.keys {
		if kid != "" && k.kid != "" && k.kid != kid {
			continue
		}
		if k.alg != "" && k.alg != alg {
			continue
		}
		switch pub := k.pub.(type) {
		case *rsa.PublicKey:
			if !a.ec && rsa.VerifyPKCS1v15(pub, a.hash, digest, sig) == nil {
				return true
			}
		case *ecdsa.PublicKey:
			if !a.ec || pub.Curve.Params().Name != a.curve {
				continue
			}
			size := (pub.Curve.Params().BitSize + 7) / 8
			if len(sig) != 2*size {
				continue
			}
			r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
			if ecdsa.Verify(pub, digest, r, s) {
				return true
			}
		}
	}
	return false
}

func (v *Verifier) checkClaims(c map[string]any) (string, error) {
	if iss, _ := c["iss"].(string); iss != v.issuer {
		return "", fmt.Errorf("token issuer %q is not %q", iss, v.issuer)
	}
	if !hasAudience(c["aud"], v.audience) {
		return "", errors.New("token audience does not include " + v.audience)
	}
	now := v.now()
	exp, ok := numericDate(c["exp"])
	if !ok {
		return "", errors.New("token has no exp")
	}
	if !now.Before(exp.Add(v.skew)) {
		return "", errors.New("token expired")
	}
	if _, present := c["nbf"]; present {
		nbf, ok := numericDate(c["nbf"])
		if !ok {
			return "", errors.New("token nbf is not a number")
		}
		if now.Add(v.skew).Before(nbf) {
			return "", errors.New("token not valid yet (nbf)")
		}
	}
	sub, _ := c["sub"].(string)
	if sub == "" {
		return "", errors.New("token has no sub")
	}
	if len(v.subjects) > 0 && !v.subjects[sub] {
		return "", fmt.Errorf("subject %q is not in the allowlist", sub)
	}
	return sub, nil
}

func hasAudience(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, x := range a {
			if s, ok := x.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

func numericDate(v any) (time.Time, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return errors.New("not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(into); err != nil {
		return errors.New("not a JSON object")
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
