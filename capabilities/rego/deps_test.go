package rego_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestRuntimeLinksNoOPA: the runtime reaches [policy.rego] only through
// the runtime/policy hook; no runtime package, and no family but rego,
// depends on OPA.
func TestRuntimeLinksNoOPA(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-test=false", "-f", "{{.ImportPath}} {{join .Deps \" \"}}",
		"github.com/kilnworks/kiln/runtime/...", "github.com/kilnworks/kiln/capabilities/...")
	cmd.Dir = testtool.RepoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(pkg, "github.com/kilnworks/kiln/") || strings.HasPrefix(pkg, "github.com/kilnworks/kiln/capabilities/rego") {
			continue
		}
		if strings.Contains(deps, opaModule+"/") && pkg != "github.com/kilnworks/kiln/capabilities/all" {
			t.Errorf("%s depends on OPA", pkg)
		}
	}
}
