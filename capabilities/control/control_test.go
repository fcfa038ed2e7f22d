package control

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func compile(t *testing.T, nodes []workflow.Node, edges []workflow.Edge) *runtime.Program {
	t.Helper()
	p, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: nodes, Edges: edges}, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runWith(t *testing.T, p *runtime.Program, e *runtime.Engine, payloadJSON string) *runtime.Report {
	t.Helper()
	payload, err := runtime.DecodeJSON([]byte(payloadJSON))
	if err != nil {
		t.Fatal(err)
	}
	if e == nil {
		e = &runtime.Engine{}
	}
	return e.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", payload)})
}

func path(r *runtime.Report) string { return strings.Join(r.Trace.Path(), ",") }

// gate -> yes (when true) | no (when false); both merge into end.
func conditionProgram(t *testing.T, kind string) *runtime.Program {
	return compile(t, []workflow.Node{
		{ID: "gate", Type: kind, Expr: "trigger.v"},
		{ID: "yes", Type: "merge"}, {ID: "no", Type: "merge"},
	}, []workflow.Edge{
		{From: "gate", To: "yes", When: "true"},
		{From: "gate", To: "no", When: "false"},
	})
}

func TestConditionTruthiness(t *testing.T) {
	p := conditionProgram(t, "condition")
	cases := map[string]string{
		`{}`:            "gate,no", // missing path -> null -> false
		`{"v":null}`:    "gate,no",
		`{"v":false}`:   "gate,no",
		`{"v":""}`:      "gate,no",
		`{"v":0}`:       "gate,no",
		`{"v":0.0}`:     "gate,no",
		`{"v":[]}`:      "gate,no",
		`{"v":{}}`:      "gate,no",
		`{"v":true}`:    "gate,yes",
		`{"v":"false"}`: "gate,yes",
		`{"v":"0"}`:     "gate,yes",
		`{"v":0.001}`:   "gate,yes",
		`{"v":[null]}`:  "gate,yes",
		`{"v":{"a":0}}`: "gate,yes",
	}
	for payload, want := range cases {
		r := runWith(t, p, nil, payload)
		if got := path(r); got != want || r.Outcome.Status != runtime.StatusCompleted {
			t.Errorf("%s: path %s (%s), want %s", payload, got, r.Outcome.Status, want)
		}
	}
	// The output is {value}.
	r := runWith(t, p, nil, `{"v":"x"}`)
	if got, _ := runtime.EncodeJSON(r.Trace.Entries[0].Output); string(got) != `{"value":"x"}` {
		t.Fatalf("condition output %s", got)
	}
	// merge's output is null: the dead-end final value is null.
	if r.Outcome.FinalValue != nil || r.Outcome.LastNode != "yes" {
		t.Fatalf("merge final value %v", r.Outcome.FinalValue)
	}
}

func TestSwitchLabels(t *testing.T) {
	labels := []string{"1", "1.0", "true", "null", "array", "object", "comment", "42"}
	nodes := []workflow.Node{{ID: "route", Type: "switch", Expr: "trigger.v"}}
	var edges []workflow.Edge
	for i, l := range labels {
		id := "to_" + string(rune('a'+i))
		nodes = append(nodes, workflow.Node{ID: id, Type: "merge"})
		edges = append(edges, workflow.Edge{From: "route", To: id, When: l})
	}
	p := compile(t, nodes, edges)
	cases := map[string]string{
		`{"v":1}`:         "to_a",
		`{"v":1.0}`:       "to_b", // 1.0 stays "1.0"
		`{"v":true}`:      "to_c",
		`{"v":null}`:      "to_d",
		`{}`:              "to_d",
		`{"v":[1]}`:       "to_e",
		`{"v":{"k":1}}`:   "to_f",
		`{"v":"comment"}`: "to_g",
		`{"v":42}`:        "to_h",
	}
	for payload, want := range cases {
		r := runWith(t, p, nil, payload)
		if r.Outcome.LastNode != want {
			t.Errorf("%s: went to %s, want %s", payload, r.Outcome.LastNode, want)
		}
	}
	// An unmatched label dead-ends at the switch with its {value}.
	r := runWith(t, p, nil, `{"v":"other"}`)
	if r.Outcome.LastNode != "route" || r.Trace.Entries[0].Branch != "other" {
		t.Fatalf("unmatched: %+v", r.Outcome)
	}
}

func TestFailTerminate(t *testing.T) {
	p := compile(t, []workflow.Node{{ID: "start", Type: "merge"}, {ID: "reject", Type: "fail", Reason: "input failed schema check"}},
		[]workflow.Edge{{From: "start", To: "reject"}})
	r := runWith(t, p, nil, `{}`)
	if r.Outcome.Status != runtime.StatusFailed || r.Outcome.Reason != "input failed schema check" || r.Outcome.LastNode != "reject" {
		t.Fatalf("fail: %+v", r.Outcome)
	}
	p = compile(t, []workflow.Node{{ID: "reject", Type: "fail"}}, nil)
	if r := runWith(t, p, nil, `{}`); r.Outcome.Reason != "workflow failed" {
		t.Fatalf("default reason %q", r.Outcome.Reason)
	}
	p = compile(t, []workflow.Node{{ID: "done", Type: "terminate"}, {ID: "never", Type: "merge"}},
		[]workflow.Edge{{From: "done", To: "never"}})
	r = runWith(t, p, nil, `{}`)
	if r.Outcome.Status != runtime.StatusCompleted || r.Outcome.FinalValue != nil || r.Outcome.LastNode != "done" || path(r) != "done" {
		t.Fatalf("terminate: %+v", r.Outcome)
	}
}

func TestRespond(t *testing.T) {
	status := 201
	p := compile(t, []workflow.Node{
		{ID: "first", Type: "respond", BodyTemplate: `{"hello":"{{name}}"}`},
		{ID: "answer", Type: "respond", Status: &status, ContentType: "text/xml",
			BodyTemplate: "<Say>{{label}} for {{trigger.name}} {{nope}}</Say>", InputFrom: "trigger.result"},
	}, []workflow.Edge{{From: "first", To: "answer"}})
	r := runWith(t, p, nil, `{"name":"Ada","result":{"label":"positive"}}`)
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", r.Outcome)
	}
	// Default: status 200, application/json, rendered against the trigger.
	first, _ := runtime.EncodeJSON(r.Trace.Entries[0].Output)
	if string(first) != `{"bytes":15,"content_type":"application/json","status":200}` {
		t.Fatalf("first respond output %s", first)
	}
	// The last respond wins; input_from first, then the whole context; a miss stays.
	got := r.Outcome.HTTPResponse
	if got == nil || got.Status != 201 || got.ContentType != "text/xml" || got.Body != "<Say>positive for Ada {{nope}}</Say>" {
		t.Fatalf("http_response = %+v", got)
	}

	for _, bad := range []int{99, 600} {
		s := bad
		_, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "r", Type: "respond", Status: &s}}}, runtime.CompileOptions{})
		if err == nil || !strings.Contains(err.Error(), "node r (respond)") || !strings.Contains(err.Error(), "100..599") {
			t.Errorf("status %d: %v", bad, err)
		}
	}
	_, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "r", Type: "respond", ContentType: "text/plain\r\nX-Evil: 1"}}}, runtime.CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not a media type") {
		t.Fatalf("CRLF content type: %v", err)
	}
}

func TestPauseForApproval(t *testing.T) {
	p := compile(t, []workflow.Node{{ID: "prep", Type: "merge"}, {ID: "approve", Type: "pause_for_approval", Reason: "Review, then resume."},
		{ID: "apply", Type: "terminate"}}, []workflow.Edge{{From: "prep", To: "approve"}, {From: "approve", To: "apply"}})
	r := runWith(t, p, nil, `{}`)
	if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, "node approve (pause_for_approval)") ||
		!strings.Contains(r.Outcome.Reason, "--state-dir") {
		t.Fatalf("pause without state dir: %+v", r.Outcome)
	}
	dir := t.TempDir()
	r = runWith(t, p, &runtime.Engine{StateDir: dir}, `{}`)
	if r.Outcome.Status != runtime.StatusPaused || r.Outcome.Reason != "Review, then resume." || r.Outcome.LastNode != "approve" {
		t.Fatalf("pause: %+v", r.Outcome)
	}
	cp, _ := runtime.CheckpointPath(dir, r.Outcome.RunID)
	if _, err := os.Stat(cp); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

func TestMissingExprIsALoadError(t *testing.T) {
	for _, kind := range []string{"condition", "switch"} {
		_, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "g", Type: kind}}}, runtime.CompileOptions{})
		if err == nil || !strings.Contains(err.Error(), "node g ("+kind+"): expr is required") {
			t.Errorf("%s: %v", kind, err)
		}
	}
}
