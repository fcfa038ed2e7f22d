package llm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/capabilities/schema"
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
func compileSchema(name string, assets map[string][]byte) (*outputSchema, error) {
	if name == inlineSchema {
		return &outputSchema{name: name}, nil
	}
	data, ok := assets[name]
	if !ok {
		return nil, fmt.Errorf("output_schema %q was not loaded: the schema file is missing or unreadable", name)
	}
	s, err := schema.Compile(name, data)
	var re *schema.RefError
	var je *schema.JSONError
	switch {
	case errors.As(err, &re):
		return nil, fmt.Errorf("output_schema %q: $ref to %s refused: output schemas must be self-contained (remote and file loading are disabled)", name, re.Ref)
	case errors.As(err, &je):
		return nil, fmt.Errorf("output_schema %q is not valid JSON: %v", name, je.Err)
	case err != nil:
		return nil, fmt.Errorf("output_schema %q: %v", name, err)
	}
	return &outputSchema{name: name, schema: s, source: string(data)}, nil
}

// answerError is a rejected answer. When the answer was not JSON at all,
// the text says so ("JSON"), as docs/intelligence.md documents.
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
	leaves, ok := schema.Violations(err)
	if !ok {
		return err.Error()
	}
	out := make([]string, len(leaves))
	for i, l := range leaves {
		out[i] = fmt.Sprintf("at %s: %s", l.Location, l.Message)
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}
