package stricttoml

import (
	"strings"
	"testing"
)

// TestDecodeRefusesDeepNesting: catalogs, profiles and fixtures (all read
// here) refuse a nesting bomb before decoding, naming file and line.
func TestDecodeRefusesDeepNesting(t *testing.T) {
	var v map[string]any
	doc := "name = \"a\"\n\nx = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	if _, err := Decode("profile.toml", []byte(doc), &v); err == nil || err.Error() != "profile.toml:3: nesting deeper than 64" {
		t.Fatalf("got %v", err)
	}
	if v != nil {
		t.Fatalf("decoded %v", v)
	}
	ok := "x = " + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "\n"
	if _, err := Decode("profile.toml", []byte(ok), &v); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
}
