package reference

import (
	"bytes"
	"os"
	"testing"
)

// TestReferenceUpToDate: docs/reference.md is what the declarations
// render to; regenerate with go generate ./capabilities/spec/reference.
func TestReferenceUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := Markdown(); !bytes.Equal(got, want) {
		t.Fatal("docs/reference.md is out of date with the capability families' declarations: run go generate ./capabilities/spec/reference")
	}
}
