package pgstate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// TestPlanLinksTheFamilyAndStatesItsNeeds: through the generator, a
// workflow with [state] backend = "postgres" links pgstate (tag
// kiln_pgstate), and its needs show the database host and the
// connection string's secret; the same workflow without the block links
// neither.
func TestPlanLinksTheFamilyAndStatesItsNeeds(t *testing.T) {
	plan := func(src string) *gen.Plan {
		t.Helper()
		path := filepath.Join(t.TempDir(), "workflow.toml")
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		wf, err := gen.Load(path, gen.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := gen.NewPlan(wf, gen.PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := strings.Replace(replicaWorkflow, `type = "pgstatetest_node"`, `type = "terminate"`, 1)
	shared := plan(base + `
[state]
backend = "postgres"
host = "DB.internal:6432"
dsn_secret = "STATE_DSN"

[[secrets]]
name = "STATE_DSN"
source = "file"
path = "/run/secrets/state-dsn"
`)
	if !slices.Contains(shared.Families, "pgstate") {
		t.Fatalf("families %v", shared.Families)
	}
	needs := string(shared.NeedsJSON)
	for _, want := range []string{`"id":"network:db.internal"`, `"id":"secret:STATE_DSN","kind":"secret","label":"[state] connection string"`} {
		if !strings.Contains(needs, want) {
			t.Errorf("needs lack %s:\n%s", want, needs)
		}
	}
	local := plan(base)
	if slices.Contains(local.Families, "pgstate") || strings.Contains(string(local.NeedsJSON), "pgstate") {
		t.Fatalf("without [state]: families %v needs %s", local.Families, local.NeedsJSON)
	}
}
