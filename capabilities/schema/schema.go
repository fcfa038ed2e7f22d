// Package schema is the schema capability family (build tag kiln_schema):
// it compiles self-contained JSON Schemas with
// santhosh-tekuri/jsonschema/v5 and lists validation failures. It is the
// one place the loader (workflow validation), the http family
// (input_schema) and the llm family (output_schema) compile schemas, so all
// three refuse the same things: nothing is ever fetched, and every $ref
// that leaves the document is an error.
//
// The library compiles its meta-schemas in its package init (milliseconds
// and about a megabyte of heap at every start), so only binaries whose
// workflow declares a schema link it: the http and llm families reach it
// through runtime.CompileSchema, which this package serves from init.
package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/runtime"
)

func init() {
	runtime.RegisterSchemaCompiler(compileValidator)
}

// RefError is a $ref to another document (remote URL or file): refused.
type RefError = runtime.SchemaRefError

// JSONError is schema text that is not JSON.
type JSONError = runtime.SchemaJSONError

// validator is a compiled schema as the runtime sees it.
type validator struct{ s *jsonschema.Schema }

func compileValidator(name string, data []byte) (runtime.SchemaValidator, error) {
	s, err := Compile(name, data)
	if err != nil {
		return nil, err
	}
	return validator{s}, nil
}

// Validate lists the leaf failures of v. A failure with no leaf, or
// that is not a mismatch (the validator's own error), is one violation
// without a location: an error is never reported as valid.
func (v validator) Validate(x any) []Violation {
	err := v.s.Validate(x)
	if err == nil {
		return nil
	}
	leaves, ok := Violations(err)
	if !ok || len(leaves) == 0 {
		return []Violation{{Message: err.Error()}}
	}
	return leaves
}

// Compile compiles data (the schema file named name) offline. Errors are a
// *RefError, a *JSONError, or the compiler's own error unwrapped to its
// useful part. It never panics on hostile input.
func Compile(name string, data []byte) (s *jsonschema.Schema, err error) {
	defer func() {
		// The compiler walks arbitrary documents; never let one crash a load.
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("schema does not compile: %v", r)
		}
	}()
	c := jsonschema.NewCompiler()
	var refused string
	c.LoadURL = func(ref string) (io.ReadCloser, error) {
		refused = ref
		return nil, &RefError{Ref: ref}
	}
	// A private scheme: relative $refs resolve inside it and reach LoadURL.
	base := (&url.URL{Scheme: "kiln-schema", Path: "/" + strings.TrimLeft(name, "/")}).String()
	if err := c.AddResource(base, bytes.NewReader(data)); err != nil {
		return nil, &JSONError{Err: err}
	}
	s, err = c.Compile(base)
	if err != nil {
		if refused != "" {
			return nil, &RefError{Ref: refused}
		}
		return nil, unwrap(err)
	}
	return s, nil
}

// unwrap follows the compiler's SchemaError chain to its useful part.
func unwrap(err error) error {
	var se *jsonschema.SchemaError
	if errors.As(err, &se) && se.Err != nil {
		return unwrap(se.Err)
	}
	return err
}

// Violation is one leaf failure of a validation.
type Violation = runtime.SchemaViolation

// Violations lists the leaf failures of a Validate error in the order the
// validator reports them; ok is false when err is not a validation error.
func Violations(err error) (out []Violation, ok bool) {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, false
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			out = append(out, Violation{Location: loc, Message: e.Message})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out, true
}
