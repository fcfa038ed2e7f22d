package schema

import (
	"errors"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

func TestCompileRefusesExternalRefs(t *testing.T) {
	for _, src := range []string{
		`{"$ref": "https://example.com/s.json"}`,
		`{"$ref": "other.json"}`,
		`{"properties": {"a": {"$ref": "file:///etc/passwd"}}}`,
	} {
		_, err := Compile("s.json", []byte(src))
		var re *RefError
		if !errors.As(err, &re) || re.Ref == "" {
			t.Errorf("%s: want a RefError, got %v", src, err)
		}
	}
	var je *JSONError
	if _, err := Compile("s.json", []byte(`{not json`)); !errors.As(err, &je) {
		t.Errorf("want a JSONError, got %v", err)
	}
	if _, err := Compile("s.json", []byte(`{"type": 12}`)); err == nil {
		t.Error("an invalid schema compiled")
	}
}

func TestViolations(t *testing.T) {
	s, err := Compile("s.json", []byte(`{"$defs": {"n": {"type": "integer"}}, "type": "object",
		"properties": {"a": {"$ref": "#/$defs/n"}, "b": {"type": "string"}}, "required": ["c"]}`))
	if err != nil {
		t.Fatal(err)
	}
	leaves, ok := Violations(s.Validate(map[string]any{"a": "x", "b": 1.0}))
	if !ok || len(leaves) != 3 {
		t.Fatalf("leaves = %+v", leaves)
	}
	locs := map[string]bool{}
	for _, l := range leaves {
		locs[l.Location] = true
	}
	if !locs["/a"] || !locs["/b"] || !locs["/"] {
		t.Fatalf("locations = %v", locs)
	}
	if _, ok := Violations(errors.New("other")); ok {
		t.Fatal("a non-validation error reported as violations")
	}
}

// TestRegisteredValidator: the family serves runtime.CompileSchema from
// init, refusing what Compile refuses, and reports every leaf failure; a
// value the validator cannot judge is a failure, never valid.
func TestRegisteredValidator(t *testing.T) {
	var re *runtime.SchemaRefError
	if _, err := runtime.CompileSchema("s.json", []byte(`{"$ref": "https://example.com/s.json"}`)); !errors.As(err, &re) {
		t.Fatalf("remote $ref: %v", err)
	}
	v, err := runtime.CompileSchema("s.json", []byte(`{"type": "object", "required": ["a"], "properties": {"b": {"type": "string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Validate(map[string]any{"a": 1.0, "b": "x"}); got != nil {
		t.Errorf("valid value: %v", got)
	}
	got := v.Validate(map[string]any{"b": 2.0})
	if len(got) != 2 {
		t.Fatalf("violations = %v", got)
	}
	locs := map[string]bool{got[0].Location: true, got[1].Location: true}
	if !locs["/"] || !locs["/b"] {
		t.Errorf("violations = %v", got)
	}
	// Not a value DecodeJSON produces: the validator's own error.
	if got := v.Validate(map[string]any{"a": 1.0, "b": struct{}{}}); len(got) != 1 || got[0].Location != "" || got[0].Message == "" {
		t.Errorf("a value the validator cannot judge: %v", got)
	}
}
