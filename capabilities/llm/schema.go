package llm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/runtime"
)

// inlineSchema is the output_schema value that asks for "any JSON" without
// a schema file (the reference runtime's behaviour for it).
const inlineSchema = "inline"

// outputSchema is a compiled output_schema. schema is nil for "inline".
type outputSchema struct {
	name   string
	schema runtime.SchemaValidator
	source string // the schema text, shown to the model in repair rounds
}

// compileSchema compiles the output_schema a node declares from the bytes
// the loader read (wf.Assets), at load time, through the schema family
// (runtime.CompileSchema). A schema that was not loaded, or a binary
// without the schema family, is an error, never a silent downgrade to
// "JSON only"; $refs that leave the file (remote URLs, other files) are
// refused.
func compileSchema(name string, assets map[string][]byte) (*outputSchema, error) {
	if name == inlineSchema {
		return &outputSchema{name: name}, nil
	}
	data, ok := assets[name]
	if !ok {
		return nil, fmt.Errorf("output_schema %q was not loaded: the schema file is missing or unreadable", name)
	}
	s, err := runtime.CompileSchema(name, data)
	var re *runtime.SchemaRefError
	var je *runtime.SchemaJSONError
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
	if leaves := s.schema.Validate(v); len(leaves) > 0 {
		return nil, &answerError{msg: fmt.Sprintf("the answer does not match output_schema %s: %s", s.name, violations(leaves))}
	}
	return v, nil
}

// violations lists the leaf failures of a validation, at most five.
func violations(leaves []runtime.SchemaViolation) string {
	out := make([]string, len(leaves))
	for i, l := range leaves {
		if l.Location == "" { // the validator's own error, not a mismatch
			out[i] = l.Message
			continue
		}
		out[i] = fmt.Sprintf("at %s: %s", l.Location, l.Message)
	}
	if len(out) > 5 {
		out = append(out[:5], fmt.Sprintf("and %d more", len(out)-5))
	}
	return strings.Join(out, "; ")
}
