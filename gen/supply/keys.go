// Package supply produces and checks kiln's supply-chain artifacts for a
// sealed binary BIN: cosign-compatible signatures (BIN.sig and a .sig beside
// each sidecar), the CycloneDX SBOM (BIN.cdx.json), the in-toto SLSA
// provenance statement (BIN.intoto.json), and offline verification of all of
// them against the binary and its manifest (BIN.manifest.json).
//
// Signatures are ECDSA P-256 over SHA-256, ASN.1 DER, base64: exactly what
// `cosign sign-blob` writes and `cosign verify-blob --key` accepts.
package supply

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv is the variable cosign reads a key password from; kiln uses
// the same one so a key pair works with both tools.
const PasswordEnv = "COSIGN_PASSWORD"

// Password returns COSIGN_PASSWORD and whether it was set. The result is
// never nil: the sigstore decoder skips decryption on a nil password, and an
// empty-password key is still encrypted.
func Password() ([]byte, bool) {
	pw, ok := os.LookupEnv(PasswordEnv)
	return append([]byte{}, pw...), ok
}

// GenerateKeyPair returns a new ECDSA P-256 key pair as cosign writes it:
// the private key in an "ENCRYPTED SIGSTORE PRIVATE KEY" PEM block
// (scrypt + secretbox, password may be empty) and the public key as PKIX PEM.
func GenerateKeyPair(password []byte) (privPEM, pubPEM []byte, err error) {
	return cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc(nonNil(password)))
}

// GenerateEd25519KeyPair returns a new Ed25519 key pair for signing
// workflow files, the private key encrypted the same way as cosign's.
func GenerateEd25519KeyPair(password []byte) (privPEM, pubPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(priv, cryptoutils.StaticPasswordFunc(nonNil(password)))
	if err != nil {
		return nil, nil, err
	}
	pubPEM, err = cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return nil, nil, err
	}
	return cryptoutils.PEMEncode(cryptoutils.EncryptedSigstorePrivateKeyPEMType, der), pubPEM, nil
}

// LoadPrivateKey reads a private key PEM file: cosign's encrypted format
// (decrypted with password) or a plain PKCS#8 / SEC 1 key. Errors name the
// file and never include key material.
func LoadPrivateKey(path string, password []byte) (crypto.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	key, err := cryptoutils.UnmarshalPEMToPrivateKey(data, cryptoutils.StaticPasswordFunc(nonNil(password)))
	if err != nil {
		if strings.Contains(string(data), string(cryptoutils.EncryptedSigstorePrivateKeyPEMType)) ||
			strings.Contains(string(data), "ENCRYPTED COSIGN PRIVATE KEY") {
			return nil, fmt.Errorf("private key %s: cannot decrypt (wrong %s?): %v", path, PasswordEnv, err)
		}
		return nil, fmt.Errorf("private key %s: %v", path, err)
	}
	return key, nil
}

// LoadSigner reads a cosign or PKCS#8 private key and returns a signer for
// ECDSA P-256 / SHA-256, the only scheme kiln signs artifacts with.
func LoadSigner(path string, password []byte) (signature.Signer, error) {
	key, err := LoadPrivateKey(path, password)
	if err != nil {
		return nil, err
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("private key %s: is %s; kiln signs with ECDSA P-256 keys (generate one with `kiln keygen` or `cosign generate-key-pair`)", path, keyKind(key))
	}
	return signature.LoadECDSASigner(ec, crypto.SHA256)
}

// LoadVerifier reads a PEM public key (PKIX) and returns an ECDSA P-256 /
// SHA-256 verifier.
func LoadVerifier(path string) (signature.Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %v", path, err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("public key %s: is %s; kiln verifies ECDSA P-256 signatures", path, keyKind(pub))
	}
	return signature.LoadECDSAVerifier(ec, crypto.SHA256)
}

// LoadEd25519PrivateKey reads an Ed25519 private key (cosign-encrypted or
// plain PKCS#8 PEM) for signing workflow files.
func LoadEd25519PrivateKey(path string, password []byte) (ed25519.PrivateKey, error) {
	key, err := LoadPrivateKey(path, password)
	if err != nil {
		return nil, err
	}
	ed, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key %s: is %s; workflow signatures use Ed25519 keys (kiln keygen --ed25519)", path, keyKind(key))
	}
	return ed, nil
}

func keyKind(k any) string {
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return "ECDSA " + k.Curve.Params().Name
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name
	case ed25519.PrivateKey, ed25519.PublicKey:
		return "Ed25519"
	case nil:
		return "no key"
	default:
		return fmt.Sprintf("a %T key", k)
	}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
