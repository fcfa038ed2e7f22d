package data

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func mustJSON(t *testing.T, s string) any {
	t.Helper()
	v, err := runtime.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := runtime.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// runChain runs nodes in sequence on the given trigger payload.
func runChain(t *testing.T, payload string, nodes ...workflow.Node) *runtime.Report {
	t.Helper()
	wf := &workflow.Workflow{Name: "t", Nodes: nodes}
	for i := 1; i < len(nodes); i++ {
		wf.Edges = append(wf.Edges, workflow.Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return (&runtime.Engine{}).Run(context.Background(), p,
		runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", mustJSON(t, payload))})
}

func TestParseJSON(t *testing.T) {
	r := runChain(t, `{"body":"{\"user\":{\"name\":\"Ada\"},\"n\":1.0}"}`,
		workflow.Node{ID: "body", Type: "parse_json", InputFrom: "trigger.body"},
		workflow.Node{ID: "name", Type: "json_select", InputFrom: "body.parsed", Path: "user.name"})
	if r.Outcome.Status != runtime.StatusCompleted || encode(t, r.Outcome.FinalValue) != `{"found":true,"value":"Ada"}` {
		t.Fatalf("%+v", r.Outcome)
	}
	if got := encode(t, r.Trace.Entries[0].Output); got != `{"parsed":{"n":1.0,"user":{"name":"Ada"}}}` {
		t.Fatalf("parse_json output %s", got)
	}

	cases := map[string]string{
		`{"body":{"already":"object"}}`: `node body (parse_json): input_from "trigger.body" resolved to an object, want a string`,
		`{"body":42}`:                   `resolved to a number, want a string`,
		`{}`:                            `node body (parse_json): input_from "trigger.body" did not resolve to a value`,
		`{"body":"not json"}`:           `node body (parse_json): input_from "trigger.body" is not valid JSON`,
		`{"body":"{} {}"}`:              `is not valid JSON`,
	}
	for payload, want := range cases {
		r := runChain(t, payload, workflow.Node{ID: "body", Type: "parse_json", InputFrom: "trigger.body"})
		if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, want) {
			t.Errorf("%s: %s %q, want errored with %q", payload, r.Outcome.Status, r.Outcome.Reason, want)
		}
	}
}

func TestJSONSelect(t *testing.T) {
	payload := `{"doc":{"items":[{"id":7},{"id":8}],"nil":null}}`
	cases := map[string]string{
		"items.1.id": `{"found":true,"value":8}`,
		"items.2.id": `{"found":false,"value":null}`,
		"nil":        `{"found":true,"value":null}`,
		"items":      `{"found":true,"value":[{"id":7},{"id":8}]}`,
		"nope.deep":  `{"found":false,"value":null}`,
	}
	for p, want := range cases {
		r := runChain(t, payload, workflow.Node{ID: "sel", Type: "json_select", InputFrom: "trigger.doc", Path: p})
		if got := encode(t, r.Outcome.FinalValue); got != want {
			t.Errorf("path %s: %s, want %s", p, got, want)
		}
	}
	// An input_from that misses selects from null: not found, no error.
	r := runChain(t, `{}`, workflow.Node{ID: "sel", Type: "json_select", InputFrom: "trigger.none", Path: "a"})
	if encode(t, r.Outcome.FinalValue) != `{"found":false,"value":null}` {
		t.Fatalf("%+v", r.Outcome)
	}
	_, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: []workflow.Node{{ID: "s", Type: "json_select", InputFrom: "trigger"}}}, runtime.CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "node s (json_select): path is required") {
		t.Fatalf("missing path: %v", err)
	}
}

func TestTemplateRender(t *testing.T) {
	r := runChain(t, `{"user":{"name":"Ada","age":36},"who":"trigger-level"}`,
		workflow.Node{ID: "info", Type: "json_select", InputFrom: "trigger", Path: "user"},
		workflow.Node{ID: "greet", Type: "template_render", InputFrom: "info.value",
			Template: "Hi {{name}}, you are {{age}}; {{trigger.who}} {{info.found}} {{missing}}"})
	want := `{"rendered":"Hi Ada, you are 36; trigger-level true {{missing}}"}`
	if got := encode(t, r.Outcome.FinalValue); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	// Without input_from the template sees only the context.
	r = runChain(t, `{"x":1.0}`, workflow.Node{ID: "t", Type: "template_render", Template: "{{x}} {{trigger.x}}"})
	if got := encode(t, r.Outcome.FinalValue); got != `{"rendered":"{{x}} 1.0"}` {
		t.Fatalf("got %s", got)
	}
}

func TestDiff(t *testing.T) {
	cases := []struct {
		left, right, want string
	}{
		{`{"a":1}`, `{"a":1}`, `{"added":{},"changed":{},"removed":{},"unchanged":true}`},
		{`{"config":{"timeout":30,"retries":3}}`, `{"config":{"timeout":60,"mode":"fast"}}`,
			`{"added":{"config.mode":"fast"},"changed":{"config.timeout":{"from":30,"to":60}},"removed":{"config.retries":3},"unchanged":false}`},
		{`{"items":[{"name":"a"},{"name":"b"}]}`, `{"items":[{"name":"a"},{"name":"c"},{"name":"d"}]}`,
			`{"added":{"items[2]":{"name":"d"}},"changed":{"items[1].name":{"from":"b","to":"c"}},"removed":{},"unchanged":false}`},
		{`[1,2,3]`, `[1]`, `{"added":{},"changed":{},"removed":{"[1]":2,"[2]":3},"unchanged":false}`},
		// 1 != "1" != true; 1 == 1.0 (numeric value)
		{`{"a":1,"b":"1","c":true,"d":1}`, `{"a":"1","b":true,"c":1,"d":1.0}`,
			`{"added":{},"changed":{"a":{"from":1,"to":"1"},"b":{"from":"1","to":true},"c":{"from":true,"to":1}},"removed":{},"unchanged":false}`},
		{`{"x":{"y":1}}`, `{"x":[1]}`, `{"added":{},"changed":{"x":{"from":{"y":1},"to":[1]}},"removed":{},"unchanged":false}`},
		{`"old"`, `"new"`, `{"added":{},"changed":{"":{"from":"old","to":"new"}},"removed":{},"unchanged":false}`},
		{`null`, `{"a":1}`, `{"added":{},"changed":{"":{"from":null,"to":{"a":1}}},"removed":{},"unchanged":false}`},
		{`{"n":null}`, `{}`, `{"added":{},"changed":{},"removed":{"n":null},"unchanged":false}`},
	}
	for _, c := range cases {
		if got := encode(t, Diff(mustJSON(t, c.left), mustJSON(t, c.right))); got != c.want {
			t.Errorf("Diff(%s, %s)\n got  %s\n want %s", c.left, c.right, got, c.want)
		}
	}
	// Through the node, with a condition-style consumer on unchanged.
	r := runChain(t, `{"old":{"v":1},"new":{"v":2}}`,
		workflow.Node{ID: "d", Type: "diff_compute", LeftFrom: "trigger.old", RightFrom: "trigger.new"})
	if got := encode(t, r.Outcome.FinalValue); got != `{"added":{},"changed":{"v":{"from":1,"to":2}},"removed":{},"unchanged":false}` {
		t.Fatalf("node: %s", got)
	}
}
