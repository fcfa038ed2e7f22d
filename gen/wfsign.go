package gen

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// WorkflowSigSuffix names a workflow file's detached signature:
// WORKFLOW.toml.sig holds the base64 of the 64-byte Ed25519 signature over
// the file's exact bytes (docs/supply-chain.md).
const WorkflowSigSuffix = ".sig"

// SignatureError says a workflow file's signature is missing, malformed or
// wrong. It is a verification failure: `kiln` exits 5 on it.
type SignatureError struct {
	File string
	Msg  string
}

func (e *SignatureError) Error() string { return e.File + ": signature: " + e.Msg }

// signReq is what a workflow's signature must satisfy.
type signReq struct {
	required bool
	key      ed25519.PublicKey // nil: use the workflow's own [signing] key
	keyFrom  string            // where key came from, for messages
	pinned   bool              // key is the operator's: nothing overrides it
}

// signState carries a loader's signature checks: the requirement from
// LoadOptions, what each loaded workflow passes on to its children, and the
// first failure (Load returns it before validating anything).
type signState struct {
	root    signReq
	rootErr error // a bad --signing-key, reported by the first check
	passed  map[*workflow.Workflow]signReq
	err     error
}

// setSigning records Load's options in the loader.
func (l *loader) setSigning(opts LoadOptions) {
	l.sign.root = signReq{required: opts.SigningRequired}
	if opts.SigningKey != nil {
		k, err := parseEd25519Public(opts.SigningKey)
		if err != nil {
			l.sign.rootErr = &ParseError{File: "--signing-key", Msg: err.Error()}
			return
		}
		l.sign.root = signReq{required: opts.SigningRequired, key: k, keyFrom: "--signing-key", pinned: true}
	}
}

// verifyRoot checks the root workflow's signature.
func (l *loader) verifyRoot(path string, data []byte, wf *workflow.Workflow) error {
	if l.sign.rootErr != nil {
		return l.sign.rootErr
	}
	next, err := verifyWorkflowSignature(l.read, path, data, wf, l.sign.root)
	if err != nil {
		return err
	}
	l.remember(wf, next)
	return nil
}

// childSignatureOK checks a child workflow's signature under what its
// parent passes on; on failure it records the error (Load returns it) and
// returns false so the child is not used.
func (l *loader) childSignatureOK(parent, child *workflow.Workflow, path string, data []byte) bool {
	req, ok := l.sign.passed[parent]
	if !ok {
		req = l.sign.root
	}
	next, err := verifyWorkflowSignature(l.read, path, data, child, req)
	if err != nil {
		if l.sign.err == nil {
			l.sign.err = err
		}
		return false
	}
	if _, done := l.sign.passed[child]; !done {
		l.remember(child, next)
	}
	return true
}

func (l *loader) remember(wf *workflow.Workflow, req signReq) {
	if l.sign.passed == nil {
		l.sign.passed = map[*workflow.Workflow]signReq{}
	}
	l.sign.passed[wf] = req
}

// verifyWorkflowSignature checks WORKFLOW.toml.sig against data, the exact
// bytes read from path, before the workflow is validated or used; read is
// the loader's file reader. It returns what the workflow's children must
// satisfy.
//
// A signature is required when req says so or the workflow's [signing] has
// required = true. The key is the operator's --signing-key when given (a
// key inside the file only proves the file is intact, not who wrote it),
// else the workflow's own public_key_file / public_key_pem, else the key a
// parent passed on. A signature that exists is checked whenever a key is
// known, required or not: a bad signature is never ignored. A workflow that
// required a signature requires one of its children too, with its key
// unless a child declares its own.
func verifyWorkflowSignature(read func(string) ([]byte, error), path string, data []byte, wf *workflow.Workflow, req signReq) (signReq, error) {
	s := wf.Signing
	required := req.required || (s != nil && s.Required)
	key, keyFrom, err := signingKey(read, path, s, req)
	if err != nil {
		return req, err
	}

	sigPath := path + WorkflowSigSuffix
	raw, err := read(sigPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if required {
			return req, &SignatureError{File: path, Msg: fmt.Sprintf("required but %s does not exist (sign with `kiln sign-workflow %s --key KEY`)", filepath.Base(sigPath), filepath.Base(path))}
		}
		return req, nil
	case err != nil:
		return req, &SignatureError{File: path, Msg: fmt.Sprintf("cannot read %s: %s", filepath.Base(sigPath), readErrText(err))}
	}
	if key == nil {
		if required {
			return req, &SignatureError{File: path, Msg: "required but no public key: set [signing] public_key_file or public_key_pem, or pass --signing-key"}
		}
		return req, nil // a .sig nobody asked for and nothing to check it with
	}
	sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(raw)))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return req, &SignatureError{File: path, Msg: fmt.Sprintf("%s is not the base64 of a %d-byte Ed25519 signature", filepath.Base(sigPath), ed25519.SignatureSize)}
	}
	if !ed25519.Verify(key, data, sig) {
		return req, &SignatureError{File: path, Msg: fmt.Sprintf("%s does not verify with the key from %s: the file was changed after signing, or another key signed it", filepath.Base(sigPath), keyFrom)}
	}
	if !required {
		return req, nil
	}
	if !req.pinned && s != nil && (s.PublicKeyFile != "" || s.PublicKeyPEM != "") {
		keyFrom += " (of " + filepath.Base(path) + ")"
	}
	return signReq{required: true, key: key, keyFrom: keyFrom, pinned: req.pinned}, nil
}

// signingKey returns the Ed25519 key to verify path with and where it came
// from. A malformed [signing] block is a *ParseError.
func signingKey(read func(string) ([]byte, error), path string, s *workflow.Signing, req signReq) (ed25519.PublicKey, string, error) {
	if s != nil {
		if s.Algorithm != "" && s.Algorithm != "ed25519" {
			return nil, "", &ParseError{File: path, Key: "signing.algorithm", Msg: fmt.Sprintf("unsupported algorithm %q (only \"ed25519\")", s.Algorithm)}
		}
		if s.PublicKeyFile != "" && s.PublicKeyPEM != "" {
			return nil, "", &ParseError{File: path, Key: "signing", Msg: "set public_key_file or public_key_pem, not both"}
		}
	}
	if req.pinned {
		return req.key, req.keyFrom, nil
	}
	switch {
	case s != nil && s.PublicKeyPEM != "":
		k, err := parseEd25519Public([]byte(s.PublicKeyPEM))
		if err != nil {
			return nil, "", &ParseError{File: path, Key: "signing.public_key_pem", Msg: err.Error()}
		}
		return k, "[signing] public_key_pem", nil
	case s != nil && s.PublicKeyFile != "":
		data, err := readBeside(read, path, s.PublicKeyFile)
		if err != nil {
			return nil, "", &ParseError{File: path, Key: "signing.public_key_file", Msg: fmt.Sprintf("cannot read %s: %s", s.PublicKeyFile, readErrText(err))}
		}
		k, err := parseEd25519Public(data)
		if err != nil {
			return nil, "", &ParseError{File: path, Key: "signing.public_key_file", Msg: fmt.Sprintf("%s: %v", s.PublicKeyFile, err)}
		}
		return k, s.PublicKeyFile, nil
	}
	return req.key, req.keyFrom, nil
}

// readBeside reads a path written in a workflow: relative to the workflow
// file's directory first, then the working directory.
func readBeside(read func(string) ([]byte, error), workflowPath, p string) ([]byte, error) {
	if filepath.IsAbs(p) {
		return read(p)
	}
	data, err := read(filepath.Join(filepath.Dir(workflowPath), p))
	if errors.Is(err, fs.ErrNotExist) {
		if d, err2 := read(p); err2 == nil {
			return d, nil
		}
	}
	return data, err
}

func parseEd25519Public(pemData []byte) (ed25519.PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemData)
	if err != nil {
		return nil, fmt.Errorf("not a PEM public key: %v", err)
	}
	k, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("is a %T, want an Ed25519 public key", pub)
	}
	return k, nil
}

// SignWorkflow writes path.sig: the base64 Ed25519 signature over the exact
// bytes of the workflow file at path. It returns the file written.
func SignWorkflow(path string, key ed25519.PrivateKey) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sig := ed25519.Sign(key, data)
	out := path + WorkflowSigSuffix
	if err := runtime.WriteFileAtomic(out, []byte(base64.StdEncoding.EncodeToString(sig)+"\n"), 0o644); err != nil {
		return "", err
	}
	return out, nil
}
