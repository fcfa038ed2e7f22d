package data

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/kilnworks/kiln/capabilities/data/parsejson"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// isValueTree reports whether v holds only the engine's value model:
// nil, bool, string, json.Number, []any and map[string]any.
func isValueTree(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, json.Number:
		return true
	case []any:
		for _, e := range x {
			if !isValueTree(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !isValueTree(e) {
				return false
			}
		}
		return true
	}
	return false
}

// The data kinds are value-model kinds: the engine does not walk their
// outputs to normalise them, so every output must already be a value
// tree, also when the values come from a trigger built with Go values
// (ints, floats, typed slices), which the engine normalises on entry.
func TestOutputsAreValueTrees(t *testing.T) {
	for _, k := range []runtime.NodeKind{parsejson.KindParseJSON, KindJSONSelect, KindTemplateRender, KindDiffCompute} {
		if !k.ValueModel {
			t.Fatalf("%s is not marked ValueModel", k.Kind)
		}
	}
	nodes := []workflow.Node{
		{ID: "parse", Type: "parse_json", InputFrom: "trigger.raw"},
		{ID: "pick", Type: "json_select", InputFrom: "trigger.obj", Path: "n"},
		{ID: "list", Type: "json_select", InputFrom: "trigger", Path: "list"},
		{ID: "obj", Type: "json_select", InputFrom: "trigger", Path: "obj"},
		{ID: "text", Type: "template_render", Template: "{{trigger.obj.n}} {{pick.value}} {{trigger.list}}"},
		{ID: "diff", Type: "diff_compute", LeftFrom: "trigger.obj", RightFrom: "parse.parsed"},
	}
	wf := &workflow.Workflow{Name: "t", Nodes: nodes}
	for i := 1; i < len(nodes); i++ {
		wf.Edges = append(wf.Edges, workflow.Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trig := runtime.MakeTrigger("manual", map[string]any{
		"raw":  `{"n": 2, "x": [1.5, null]}`,
		"obj":  map[string]any{"n": 1, "f": float32(0.5), "u": uint64(3)},
		"list": []string{"a", "b"},
	})
	rep := (&runtime.Engine{}).Run(context.Background(), p, runtime.RunOptions{Trigger: trig})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	for _, e := range rep.Trace.Entries {
		if !isValueTree(e.Output) {
			t.Errorf("%s output %#v is not a value tree", e.NodeID, e.Output)
		}
	}
	if got := encode(t, rep.Trace.Entries[4].Output); got != `{"rendered":"1 1 [\"a\",\"b\"]"}` {
		t.Errorf("template output %s", got)
	}
	if got := encode(t, rep.Trace.Entries[5].Output); got != `{"added":{"x":[1.5,null]},"changed":{"n":{"from":1,"to":2}},"removed":{"f":0.5,"u":3},"unchanged":false}` {
		t.Errorf("diff output %s", got)
	}
}
