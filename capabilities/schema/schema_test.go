package schema

import (
	"errors"
	"testing"
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
