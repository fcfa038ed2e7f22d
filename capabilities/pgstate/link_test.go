package pgstate

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestOnlyDeclaringBinariesLinkPgx: a pruned build links pgx only with
// this family's tag (a workflow with [state] backend = "postgres"); the
// runtime and the http family never bring it.
func TestOnlyDeclaringBinariesLinkPgx(t *testing.T) {
	root := testtool.RepoRoot(t)
	deps := func(tags string) []string {
		cmd := exec.Command("go", "list", "-deps", "-tags", tags, "./capabilities/all")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %s: %v\n%s", tags, err, out)
		}
		return strings.Fields(string(out))
	}
	const pgx = "github.com/jackc/pgx/v5/pgxpool"
	if d := deps("kiln_custom,kiln_control,kiln_http"); slices.Contains(d, pgx) {
		t.Error("a binary without [state] backend = \"postgres\" links pgx")
	}
	if d := deps("kiln_custom,kiln_control,kiln_http,kiln_pgstate"); !slices.Contains(d, pgx) {
		t.Error("positive control: kiln_pgstate does not link pgx")
	}
}
