package oidc

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// jwk is one key of a JWK set (RFC 7517); only public RSA and EC fields.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// key is a usable verification key.
type key struct {
	kid string
	alg string // "" = any algorithm of its type
	pub crypto.PublicKey
}

const minRSABits = 2048

// parseJWKS reads the keys that can verify signatures. Keys of other
// types (oct, OKP) are skipped; a malformed RSA or EC key, a private key,
// or a set with no usable key is an error.
func parseJWKS(data []byte) ([]key, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not valid JSON: %v", err)
	}
	var out []key
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if k.D != "" {
			return nil, fmt.Errorf("JWKS key %d (%s) contains private key material", i, k.Kid)
		}
		var pub crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			pub, err = rsaKey(k)
		case "EC":
			pub, err = ecKey(k)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("JWKS key %d (%s): %v", i, k.Kid, err)
		}
		out = append(out, key{kid: k.Kid, alg: k.Alg, pub: pub})
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS has no RSA or EC signing key")
	}
	return out, nil
}

func b64int(s string) (*big.Int, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil, errors.New("bad base64url integer")
	}
	return new(big.Int).SetBytes(b), nil
}

func rsaKey(k jwk) (*rsa.PublicKey, error) {
	n, err := b64int(k.N)
	if err != nil {
		return nil, fmt.Errorf("n: %v", err)
	}
	e, err := b64int(k.E)
	if err != nil {
		return nil, fmt.Errorf("e: %v", err)
	}
	if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
		return nil, errors.New("e: unsupported exponent")
	}
	if n.BitLen() < minRSABits {
		return nil, fmt.Errorf("RSA key of %d bits is below %d", n.BitLen(), minRSABits)
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch k.Crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	default:
		return nil, fmt.Errorf("curve %q is not supported", k.Crv)
	}
	x, err := b64int(k.X)
	if err != nil {
		return nil, fmt.Errorf("x: %v", err)
	}
	y, err := b64int(k.Y)
	if err != nil {
		return nil, fmt.Errorf("y: %v", err)
	}
	size := (curve.Params().BitSize + 7) / 8
	// Encode as an uncompressed point so crypto/ecdh-backed parsing
	// checks that it lies on the curve.
	point := make([]byte, 1+2*size)
	point[0] = 4
	if x.BitLen() > 8*size || y.BitLen() > 8*size {
		return nil, errors.New("coordinate too large for the curve")
	}
	x.FillBytes(point[1 : 1+size])
	y.FillBytes(point[1+size:])
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("point is not on %s: %v", k.Crv, err)
	}
	return pub, nil
}
