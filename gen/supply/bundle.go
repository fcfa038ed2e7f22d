package supply

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kilnworks/kiln/runtime"
)

// BundleSuffix names the Sigstore bundle written beside a signed file. A
// bundle that holds only the signature, the message digest and the public
// key hint is what `cosign sign-blob --key --bundle` writes offline, and
// `cosign verify-blob --key --bundle --insecure-ignore-tlog` accepts it.
const BundleSuffix = ".sigstore.json"

const bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

type bundle struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		PublicKey *struct {
			Hint string `json:"hint"`
		} `json:"publicKey,omitempty"`
		// Anything else (certificates, tlog entries) means keyless signing,
		// which needs the network and trust roots; kiln refuses it.
		Certificate          json.RawMessage `json:"certificate,omitempty"`
		X509CertificateChain json.RawMessage `json:"x509CertificateChain,omitempty"`
	} `json:"verificationMaterial"`
	MessageSignature *struct {
		MessageDigest struct {
			Algorithm string `json:"algorithm"`
			Digest    string `json:"digest"`
		} `json:"messageDigest"`
		Signature string `json:"signature"`
	} `json:"messageSignature,omitempty"`
}

// KeyHint is cosign's public key hint: base64 SHA-256 of the PKIX DER key.
func KeyHint(s signature.PublicKeyProvider) (string, error) {
	pub, err := s.PublicKey()
	if err != nil {
		return "", err
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// writeBundle writes path.sigstore.json for a signature sig over the file
// whose SHA-256 is digest.
func writeBundle(s signature.Signer, path string, digest, sig []byte) error {
	hint, err := KeyHint(s)
	if err != nil {
		return err
	}
	doc := map[string]any{
		"mediaType":            bundleMediaType,
		"verificationMaterial": map[string]any{"publicKey": map[string]string{"hint": hint}},
		"messageSignature": map[string]any{
			"messageDigest": map[string]string{"algorithm": "SHA2_256", "digest": base64.StdEncoding.EncodeToString(digest)},
			"signature":     base64.StdEncoding.EncodeToString(sig),
		},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return runtime.WriteFileAtomic(path+BundleSuffix, data, 0o644)
}

// verifyBundle checks path.sigstore.json against the bytes of path.
func verifyBundle(v signature.Verifier, path string) error {
	bpath := path + BundleSuffix
	data, err := os.ReadFile(bpath)
	if err != nil {
		return err
	}
	name := filepath.Base(bpath)
	var b bundle
	if err := json.Unmarshal(data, &b); err != nil {
		return fmt.Errorf("%s: not a Sigstore bundle: %v", name, err)
	}
	if len(b.VerificationMaterial.Certificate) > 0 || len(b.VerificationMaterial.X509CertificateChain) > 0 {
		return fmt.Errorf("%s: holds a certificate (keyless signing); kiln verifies key-signed bundles offline only", name)
	}
	if err := checkBundleMetadata(name, &b, v); err != nil { // verify.go
		return err
	}
	if b.MessageSignature == nil {
		return fmt.Errorf("%s: no messageSignature (DSSE bundles are not supported)", name)
	}
	if b.MessageSignature.MessageDigest.Algorithm != "SHA2_256" {
		return fmt.Errorf("%s: digest algorithm %q, want SHA2_256", name, b.MessageSignature.MessageDigest.Algorithm)
	}
	sum, err := FileSHA256(path)
	if err != nil {
		return err
	}
	want, _ := hex.DecodeString(sum)
	got, err := base64.StdEncoding.DecodeString(b.MessageSignature.MessageDigest.Digest)
	if err != nil || !bytes.Equal(got, want) {
		return fmt.Errorf("%s: message digest does not match %s (the file was changed after signing)", name, filepath.Base(path))
	}
	sig, err := base64.StdEncoding.DecodeString(b.MessageSignature.Signature)
	if err != nil {
		return fmt.Errorf("%s: signature is not base64: %v", name, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := v.VerifySignature(bytes.NewReader(sig), f); err != nil {
		return fmt.Errorf("%s: signature does not match %s under this key (the file or the bundle was changed, or another key signed it)", name, filepath.Base(path))
	}
	return nil
}
