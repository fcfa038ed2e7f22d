package needs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadApprovalsRefusesDeepNesting: an approvals file nested past the
// limit is refused by the same check as every other TOML kiln reads.
func TestLoadApprovalsRefusesDeepNesting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.toml")
	doc := "network = [\"a\"]\ncapabilities = " + strings.Repeat("[", 100_000) + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadApprovals(path); err == nil || err.Error() != path+": line 2: nesting deeper than 64" {
		t.Fatalf("got %v", err)
	}
}
