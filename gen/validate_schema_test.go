package gen

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCompileSchema(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile("../testdata/validate/schemas/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := compileSchema("ok.json", read("ok.json")); err != nil {
		t.Errorf("ok.json (internal $ref): %v", err)
	}
	for _, name := range []string{"remote-ref.json", "file-ref.json"} {
		if err := compileSchema(name, read(name)); !errors.Is(err, errRemoteRef) {
			t.Errorf("%s: want a refused $ref, got %v", name, err)
		}
	}
	if err := compileSchema("not-json.json", read("not-json.json")); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("not-json.json: got %v", err)
	}
	if err := compileSchema("invalid.json", read("invalid.json")); err == nil || errors.Is(err, errRemoteRef) {
		t.Errorf("invalid.json: got %v", err)
	}
}
