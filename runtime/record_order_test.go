package runtime

import (
	"bytes"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestRecordFieldOrder pins the run record to the key order of
// the run record (docs/durable-runs.md), including inside "detail" (the outcome, status
// first) and "cost": people diff and grep these files.
func TestRecordFieldOrder(t *testing.T) {
	p := compileT(t, []workflow.Node{out("a", `{"v":1.0}`)}, nil)
	rep := runT(t, nil, p, RunOptions{ExecutionID: "e1"})
	data, err := rep.Record()
	if err != nil {
		t.Fatal(err)
	}
	inOrder := func(keys ...string) {
		t.Helper()
		at := -1
		for _, k := range keys {
			i := bytes.Index(data[at+1:], []byte(`"`+k+`":`))
			if i < 0 {
				t.Fatalf("record lacks %q after offset %d:\n%s", k, at, data)
			}
			at += 1 + i
		}
	}
	inOrder("workflow", "start_node", "execution_id", "status", "last_node", "detail", "wall_ms", "cost", "trace")
	inOrder("detail", "status", "final_value", "last_node", "wall_ms")
	inOrder("cost", "workflow_starts", "workflow_completions", "workflow_failures", "workflow_timeouts",
		"workflow_errored", "node_executions", "node_failures", "policy_denials", "llm_calls", "llm_tokens", "trace")
	inOrder("trace", "execution_id", "entries", "node_id", "kind", "outcome", "branch", "output", "elapsed_ms")
	if !bytes.Contains(data, []byte(`"v": 1.0`)) {
		t.Fatalf("record must keep 1.0:\n%s", data)
	}
}
