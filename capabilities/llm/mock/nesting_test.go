package mock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadScriptRefusesDeepNesting: a turns file nested past the limit is
// refused before the TOML decoder sees it.
func TestLoadScriptRefusesDeepNesting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.toml")
	doc := "[[turns]]\ncontent = " + strings.Repeat("{a=", 20_000) + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(path); err == nil || err.Error() != path+": line 2: nesting deeper than 64" {
		t.Fatalf("got %v", err)
	}
}
