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
	benchRun(b, pipelineWorkflow(), runtime.MakeTrigger("manual", map[string]any{"raw": pipelineRaw}), 10)
}
