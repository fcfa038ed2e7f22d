package runtime

import (
	"fmt"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// A compiled Path resolves exactly as the same path given to Call.Lookup:
// in a top-level run and in a child (whose trigger is built lazily), with
// a scope, for node outputs, the trigger, misses, arrays and odd paths.
func TestPathResolvesAsLookup(t *testing.T) {
	p, err := Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{
		{ID: "a", Type: "t_out"}, {ID: "unset", Type: "t_out"}, {ID: "null", Type: "t_out"}}}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outputs := []nodeOutput{{mustJSON(t, `{"x":{"y":[10,{"z":"deep"}]},"":{"e":1},"n":null}`), true}, {}, {nil, true}}
	input := mustJSON(t, `{"user":{"name":"Ada"},"list":[1,2]}`)
	top := &Run{Engine: &Engine{}, Program: p, outputs: outputs}
	top.setTrigger(MakeTrigger("manual", input))
	child := &Run{Engine: &Engine{}, Program: p, outputs: outputs, Depth: 1,
		lazyTrigger: true, triggerKind: "manual", triggerInput: input}
	scalarChild := &Run{Engine: &Engine{}, Program: p, outputs: outputs, Depth: 1,
		lazyTrigger: true, triggerKind: "manual", triggerInput: "text"}
	other, err := Compile(&workflow.Workflow{Name: "o", Nodes: []workflow.Node{{ID: "q", Type: "t_out"}, {ID: "a", Type: "t_out"}}}, CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}

	paths := []string{"", ".", "a", "a.", "a.x", "a.x.y", "a.x.y.0", "a.x.y.1.z", "a.x.y.01", "a.x.y.2", "a.x.y.-1",
		"a..e", "a.n", "a.n.m", "a.missing", "unset", "unset.x", "null", "null.x", "nope", "nope.x",
		"trigger", "trigger.", "trigger.kind", "trigger.user", "trigger.user.name", "trigger.user.", "trigger.list.1",
		"trigger.input", "trigger.missing", "trigger..x", "x.trigger"}
	for name, r := range map[string]*Run{"top": top, "child": child, "child of a scalar": scalarChild} {
		for _, scope := range []map[string]any{nil, {"a": "scoped"}} {
			c := &Call{Run: r, Scope: scope}
			for _, path := range paths {
				for _, prog := range []*Program{p, other} { // a path of another program still resolves by name
					want, wantOK := c.Lookup(path)
					got, gotOK := c.Get(prog.Path(path))
					if gotOK != wantOK || fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s, scope %v, %q compiled for %s: Get = %v, %v; Lookup = %v, %v",
							name, scope, path, prog.Workflow.Name, got, gotOK, want, wantOK)
					}
				}
			}
		}
	}
}
