package llm

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

// inlineSchema is the output_schema value that asks for "any JSON" without
// a schema file (the reference runtime's behaviour for it).
const inlineSchema = "inline"

// outputSchema is a compiled output_schema. schema is nil for "inline".
type outputSchema struct {
	name   string
	schema *jsonschema.Schema
	source string // the schema text, shown to the model in repair rounds
}

// compileSchema compiles the output_schema a node declares from the bytes
// the loader read (wf.Assets), at load time. A schema that was not loaded
// is an error, never a silent downgrade to "JSON only"; $refs that leave
// the file (remote URLs, other files) are refused.
func compileSchema(name string, assets map[string][]byte) (_ *outputSchema, err error) {
	defer func() {
		// The compiler walks arbitrary documents; a bad one must not crash a load.
		if r := recover(); r != nil {
			err = fmt.Errorf("output_schema %q does not compile: %v", name, r)
		}
	}()
	if name == inlineSchema {
		return &outputSchema{name: name}, nil
	}
	data, ok := assets[name]
	if !ok {
		return nil, fmt.Errorf("output_schema %q was not loaded: the schema file is missing or unreadable", name)
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(ref string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("$ref to %s refused: output schemas must be self-contained (remote and file loading are disabled)", ref)
	}
	// A private scheme: relative $refs resolve inside it and hit LoadURL.
	base := (&url.URL{Scheme: "kiln-schema", Path: "/" + strings.TrimLeft(name, "/")}).String()
	if err := c.AddResource(base, bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("output_schema %q is not valid JSON: %v", name, err)
	}
	s, err := c.Compile(base)
	if err != nil {
		return nil, fmt.Errorf("output_schema %q: %v", name, schemaErrText(err))
	}
	return &outputSchema{name: name, schema: s, source: string(data)}, nil
}

// schemaErrText unwraps the compiler's error chain to its useful part.
func schemaErrText(err error) string {
	var se *jsonschema.SchemaError
	if errors.As(err, &se) && se.Err != nil {
		return schemaErrText(se.Err)
	}
	return err.Error()
}

// answerError is a rejected answer. When the answer was not JSON at all,
// the text says so ("JSON"), as WORKFLOW-FORMAT §6 requires.
type answerError struct{ msg string }

func (e *answerError) Error() string { return e.msg }

// check parses content as JSON and validates it.
func (s *outputSchema) check(content string) (any, *answerError) {
	v, err := runtime.DecodeJSON([]byte(strings.TrimSpace(content)))
	if err != nil {
		if strings.TrimSpace(content) == "" {
			return nil, &answerError{msg: "the answer is empty, not JSON"}
		}
		return nil, &answerError{msg: "the answer is not valid JSON: " + err.Error()}
	}
	if s.schema == nil {
		return v, nil
	}
	if err := s.schema.Validate(v); err != nil {
		return nil, &answerError{msg: fmt.Sprintf("the answer does not match output_schema %s: %s", s.name, violations(err))}
	}
	return v, nil
}

// violations lists the leaf failures of a validation error, at most five.
func violations(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := e.InstanceLocation
			if loc == "" {
				loc = "/"
			}
			out = append(out, fmt.Sprintf("at %s: %s", loc, e.Message))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}
