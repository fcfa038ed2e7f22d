package catalog_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestUsedRego: [policy.rego] selects the rego family (and so links OPA),
// in the root or in a child workflow; a [policy] without it does not.
func TestUsedRego(t *testing.T) {
	rego := &workflow.Policy{Rego: &workflow.RegoPolicy{Inline: "package agent"}}
	end := []workflow.Node{{ID: "end", Type: "terminate"}}
	for _, c := range []struct {
		name string
		wf   *workflow.Workflow
		why  string
	}{
		{"root", &workflow.Workflow{Name: "r", Policy: rego, Nodes: end}, "[policy.rego]"},
		{"child", &workflow.Workflow{Name: "r", Nodes: []workflow.Node{{ID: "c", Type: "call", Workflow: "sub.toml"}},
			Children: map[string]*workflow.Workflow{"sub.toml": {Name: "sub", Policy: rego, Nodes: end}}}, "sub.toml: [policy.rego]"},
	} {
		u, err := catalog.Used(c.wf)
		if err != nil || !slices.Contains(u.Families, "rego") || strings.Join(u.Why["rego"], ";") != c.why {
			t.Errorf("%s: families %v why %v (%v)", c.name, u.Families, u.Why["rego"], err)
		}
	}
	u, err := catalog.Used(&workflow.Workflow{Name: "s", Policy: &workflow.Policy{FS: &workflow.FSPolicy{}}, Nodes: end})
	if err != nil || slices.Contains(u.Families, "rego") {
		t.Errorf("[policy] without rego: %v %v", u.Families, err)
	}
}
