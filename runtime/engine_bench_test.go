package runtime_test

// Engine throughput benchmarks (`make bench`), reported as node steps per
// second. They use the real control and data node kinds; this external test
// package may import capability packages, the runtime package itself never
// does.

import (
	"context"
	"fmt"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/data"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func benchRun(b *testing.B, wf *workflow.Workflow, trigger map[string]any, steps int) {
	b.Helper()
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e := &runtime.Engine{}
	ctx := context.Background()
	opts := runtime.RunOptions{Trigger: trigger, ExecutionID: "bench"}
	// Check once that the workflow does what the benchmark claims.
	if r := e.Run(ctx, p, opts); r.Outcome.Status != runtime.StatusCompleted || len(r.Trace.Entries) != steps {
		b.Fatalf("benchmark workflow: %s after %d steps (%s)", r.Outcome.Status, len(r.Trace.Entries), r.Outcome.Reason)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Run(ctx, p, opts)
	}
	b.ReportMetric(float64(b.N*steps)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkEngineMergeChain runs a chain of 20 merge nodes.
func BenchmarkEngineMergeChain(b *testing.B) {
	wf := &workflow.Workflow{Name: "merge-chain"}
	for i := 0; i < 20; i++ {
		wf.Nodes = append(wf.Nodes, workflow.Node{ID: fmt.Sprintf("m%02d", i), Type: "merge"})
		if i > 0 {
			wf.Edges = append(wf.Edges, workflow.Edge{From: fmt.Sprintf("m%02d", i-1), To: fmt.Sprintf("m%02d", i)})
		}
	}
	benchRun(b, wf, runtime.MakeTrigger("manual", nil), 20)
}

// BenchmarkEngineDataPipeline runs a 10-node data pipeline: parse, select,
// render, branch, diff and join.
func BenchmarkEngineDataPipeline(b *testing.B) {
	nodes := []workflow.Node{
		{ID: "body", Type: "parse_json", InputFrom: "trigger.raw"},
		{ID: "user", Type: "json_select", InputFrom: "body.parsed", Path: "user"},
		{ID: "name", Type: "json_select", InputFrom: "user.value", Path: "name"},
		{ID: "greet", Type: "template_render", Template: "Hi {{name}}, {{age}} ({{trigger.kind}})", InputFrom: "user.value"},
		{ID: "gate", Type: "condition", Expr: "name.found"},
		{ID: "route", Type: "switch", Expr: "body.parsed.plan"},
		{ID: "diff", Type: "diff_compute", LeftFrom: "body.parsed.old", RightFrom: "body.parsed.new"},
		{ID: "join", Type: "merge"},
		{ID: "summary", Type: "template_render", Template: "{{greet.rendered}} changed={{diff.changed}}"},
		{ID: "out", Type: "json_select", InputFrom: "summary", Path: "rendered"},
	}
	edges := []workflow.Edge{
		{From: "body", To: "user"}, {From: "user", To: "name"}, {From: "name", To: "greet"},
		{From: "greet", To: "gate"}, {From: "gate", To: "route", When: "true"},
		{From: "route", To: "diff", When: "pro"}, {From: "diff", To: "join"},
		{From: "join", To: "summary"}, {From: "summary", To: "out"},
	}
	raw := `{"user":{"name":"Ada","age":36},"plan":"pro","old":{"a":1,"b":[1,2]},"new":{"a":2,"b":[1,2,3]}}`
	benchRun(b, &workflow.Workflow{Name: "data-pipeline", Nodes: nodes, Edges: edges},
		runtime.MakeTrigger("manual", map[string]any{"raw": raw}), 10)
}
