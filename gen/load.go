// Package gen reads workflows strictly, validates them, plans their
// capabilities and needs, and emits and builds sealed Go programs.
package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// ParseError is an input error that stops loading: the file cannot be read,
// is not TOML, has an unknown key or a value of the wrong type. It names
// the file and line. `kiln` exits 2 on it.
type ParseError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadOptions tunes Load.
type LoadOptions struct {
	// SkipValidate returns the decoded workflow without validating it.
	SkipValidate bool
}

// document is the top level of a workflow file: either a workflow, or one
// workflow wrapped as [[workflows]].
type document struct {
	workflow.Workflow
	Workflows []workflow.Workflow `toml:"workflows"`
}

// Load reads, strictly decodes and validates the workflow at path. It
// returns a *ParseError for unreadable or malformed input and a
// *ValidationError listing every issue of a well-formed but invalid one.
func Load(path string, opts LoadOptions) (*workflow.Workflow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ParseError{File: path, Msg: fmt.Sprintf("cannot read: %v", errors.Unwrap(err))}
	}
	wf, err := Decode(path, data)
	if err != nil {
		return nil, err
	}
	if opts.SkipValidate {
		return wf, nil
	}
	if err := Validate(wf); err != nil {
		return nil, err
	}
	return wf, nil
}

// Decode strictly decodes workflow TOML; name is used in error messages.
func Decode(name string, data []byte) (*workflow.Workflow, error) {
	var doc document
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{File: name, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message}
		}
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		return nil, &ParseError{File: name, Key: k.String(), Msg: "unknown key"}
	}
	wf := &doc.Workflow
	if len(doc.Workflows) > 0 {
		if len(doc.Workflows) > 1 {
			return nil, &ParseError{File: name, Key: "workflows", Msg: "a file may wrap exactly one workflow"}
		}
		wf = &doc.Workflows[0]
	}
	sum := sha256.Sum256(data)
	wf.Source = name
	wf.Digest = hex.EncodeToString(sum[:])
	return wf, nil
}

// Validate is replaced by the full validator; this placeholder only checks
// what the engine cannot do without.
func Validate(wf *workflow.Workflow) error {
	if wf.Name == "" {
		return fmt.Errorf("workflow has no name")
	}
	return nil
}
