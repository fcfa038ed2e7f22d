package workflow

import "testing"

func TestTreeVisitsEachWorkflowOnceInPathOrder(t *testing.T) {
	shared := &Workflow{Name: "shared"}
	b := &Workflow{Name: "b", Children: map[string]*Workflow{"s.toml": shared}}
	root := &Workflow{Name: "root", Children: map[string]*Workflow{
		"z.toml": shared, "b.toml": b, "missing.toml": nil,
	}}
	root.Children["self.toml"] = root // a cycle is visited once
	var got string
	for _, w := range Tree(root) {
		got += w.Name + " "
	}
	if want := "root b shared "; got != want {
		t.Fatalf("Tree = %q, want %q", got, want)
	}
	if len(Tree(nil)) != 0 {
		t.Fatal("Tree(nil) is not empty")
	}
}
