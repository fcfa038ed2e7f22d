package runtime

import (
	"errors"
	"sync"
)

// SchemaViolation is one leaf failure of a JSON Schema validation.
type SchemaViolation struct {
	// Location is a JSON pointer into the instance ("/" for the root);
	// empty when the validator failed for another reason than a mismatch.
	Location string
	Message  string
}

// String is "<location>: <message>", or the message alone without a
// location.
func (v SchemaViolation) String() string {
	if v.Location == "" {
		return v.Message
	}
	return v.Location + ": " + v.Message
}

// SchemaValidator is a compiled JSON Schema. It must be safe for
// concurrent use.
type SchemaValidator interface {
	// Validate checks v (a value of DecodeJSON) and returns its leaf
	// failures in the validator's order; nil when v is valid.
	Validate(v any) []SchemaViolation
}

// SchemaCompiler compiles the schema file name from its loaded bytes,
// offline. Its errors are a *SchemaRefError, a *SchemaJSONError, or the
// compiler's own error.
type SchemaCompiler func(name string, data []byte) (SchemaValidator, error)

// SchemaRefError is a $ref to another document (remote URL or file):
// refused, since nothing is ever fetched.
type SchemaRefError struct{ Ref string }

func (e *SchemaRefError) Error() string { return "$ref to " + e.Ref + " refused" }

// SchemaJSONError is schema text that is not JSON.
type SchemaJSONError struct{ Err error }

func (e *SchemaJSONError) Error() string { return "not valid JSON: " + e.Err.Error() }

// ErrNoSchemaFamily is CompileSchema's error in a binary that does not
// link the schema family: a declared schema is refused, never skipped.
var ErrNoSchemaFamily = errors.New("this binary does not link the schema capability family (build tag kiln_schema), so it cannot validate JSON Schemas; rebuild it with kiln build")

var (
	schemaMu       sync.RWMutex
	schemaCompiler SchemaCompiler
)

// RegisterSchemaCompiler installs the JSON Schema compiler (the schema
// family does, from init). The runtime never links one itself: the
// library compiles its meta-schemas at start-up, a cost only binaries
// whose workflow declares a schema should pay.
func RegisterSchemaCompiler(c SchemaCompiler) {
	schemaMu.Lock()
	defer schemaMu.Unlock()
	schemaCompiler = c
}

// CompileSchema compiles a schema through the registered compiler;
// ErrNoSchemaFamily when none is.
func CompileSchema(name string, data []byte) (SchemaValidator, error) {
	schemaMu.RLock()
	c := schemaCompiler
	schemaMu.RUnlock()
	if c == nil {
		return nil, ErrNoSchemaFamily
	}
	return c(name, data)
}
