package supply

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kilnworks/kiln/runtime"
)

// Artifact file names beside a binary BIN.
const (
	SigSuffix        = ".sig"
	ManifestSuffix   = ".manifest.json"
	SBOMSuffix       = ".cdx.json"
	ProvenanceSuffix = ".intoto.json"
)

// errNoSignature marks a file with neither .sig nor bundle, so callers can
// tell "unsigned" from "signed but wrong".
var errNoSignature = errors.New("no signature")

// Sidecars returns the sidecar files of bin that are signed with it, in
// signing order: manifest, SBOM, provenance.
func Sidecars(bin string) []string {
	return []string{bin + ManifestSuffix, bin + SBOMSuffix, bin + ProvenanceSuffix}
}

// SignFile signs the exact bytes of path and writes the base64 signature to
// path.sig, the layout `cosign sign-blob --output-signature` uses, and the
// same signature as a Sigstore bundle to path.sigstore.json (cosign v3's
// preferred form).
func SignFile(s signature.Signer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sig, err := s.SignMessage(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("sign %s: %w", path, err)
	}
	if err := runtime.WriteFileAtomic(path+SigSuffix, []byte(base64.StdEncoding.EncodeToString(sig)), 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	return writeBundle(s, path, sum[:], sig)
}

// SignArtifacts signs bin and each of its sidecars that exists, and returns
// the signature files written. The binary must exist.
func SignArtifacts(s signature.Signer, bin string) ([]string, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, err
	}
	files := []string{bin}
	for _, side := range Sidecars(bin) {
		if _, err := os.Stat(side); err == nil {
			files = append(files, side)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	var sigs []string
	for _, f := range files {
		if err := SignFile(s, f); err != nil {
			return sigs, err
		}
		sigs = append(sigs, f+SigSuffix, f+BundleSuffix)
	}
	return sigs, nil
}

// VerifyFile checks the signature of path: path.sig (base64, as cosign
// sign-blob writes it) and path.sigstore.json (a key-signed bundle), each
// that exists; at least one must. The error names the file that failed and
// why, never the key.
func VerifyFile(v signature.Verifier, path string) error {
	checked := 0
	for _, check := range []struct {
		suffix string
		verify func(signature.Verifier, string) error
	}{{SigSuffix, verifySig}, {BundleSuffix, verifyBundle}} {
		if _, err := os.Stat(path + check.suffix); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := check.verify(v, path); err != nil {
			return err
		}
		checked++
	}
	if checked == 0 {
		return fmt.Errorf("%w (expected %s or %s)", errNoSignature,
			filepath.Base(path+SigSuffix), filepath.Base(path+BundleSuffix))
	}
	return nil
}

func verifySig(v signature.Verifier, path string) error {
	sigPath := path + SigSuffix
	raw, err := os.ReadFile(sigPath)
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil {
		return fmt.Errorf("%s: not a base64 signature: %v", filepath.Base(sigPath), err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := v.VerifySignature(bytes.NewReader(sig), f); err != nil {
		return fmt.Errorf("%s: signature does not match %s under this key (the file or its signature was changed, or another key signed it)", filepath.Base(sigPath), filepath.Base(path))
	}
	return nil
}
