package runtime

import (
	"errors"
	"testing"
)

type fixedValidator []SchemaViolation

func (f fixedValidator) Validate(any) []SchemaViolation { return f }

// TestCompileSchemaFailsClosed: without a registered compiler (a binary
// without the schema family) a schema is refused, never skipped; with one,
// CompileSchema is that compiler.
func TestCompileSchemaFailsClosed(t *testing.T) {
	schemaMu.Lock()
	saved := schemaCompiler
	schemaCompiler = nil
	schemaMu.Unlock()
	t.Cleanup(func() { RegisterSchemaCompiler(saved) })

	if v, err := CompileSchema("s.json", []byte(`{}`)); v != nil || !errors.Is(err, ErrNoSchemaFamily) {
		t.Fatalf("no compiler: %v, %v", v, err)
	}
	RegisterSchemaCompiler(func(name string, data []byte) (SchemaValidator, error) {
		return fixedValidator{{Location: "/" + name, Message: string(data)}}, nil
	})
	v, err := CompileSchema("a", []byte("bad"))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Validate(nil); len(got) != 1 || got[0].String() != "/a: bad" {
		t.Errorf("violations = %v", got)
	}
	if s := (SchemaViolation{Message: "loop"}).String(); s != "loop" {
		t.Errorf("a violation without a location = %q", s)
	}
}
