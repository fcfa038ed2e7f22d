package runtime

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestNodeEvents: at debug level every node attempt logs node.completed
// (with its branch) or node.failed (with its class), attempt by attempt;
// [logging] node_events = false turns them off, and at the default info
// level none is written.
func TestNodeEvents(t *testing.T) {
	two := 2
	flaky := workflow.Node{ID: "f", Type: "t_flaky", MaxItems: &two, Reason: string(ClassTool), Retry: &workflow.Retry{MaxAttempts: 3, BackoffMS: new(int)}}
	nodes := []workflow.Node{branchNode("a", "left"), flaky}
	edges := []workflow.Edge{wedge("a", "f", "left")}
	run := func(level string, nodeEvents *bool) string {
		t.Helper()
		var buf bytes.Buffer
		l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf, Level: level})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(&workflow.Workflow{Name: "t", Nodes: nodes, Edges: edges,
			Logging: &workflow.Logging{NodeEvents: nodeEvents}}, CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := runT(t, &Engine{Audit: l}, p, RunOptions{})
		wantStatus(t, r, StatusCompleted, "f")
		return buf.String()
	}

	log := run("debug", nil)
	for _, want := range []string{
		`level=DEBUG msg=node.completed execution_id=\S+ workflow=t node=a kind=t_out attempt=1 elapsed_ms=[0-9.]+ branch=left\n`,
		`level=DEBUG msg=node.failed execution_id=\S+ workflow=t node=f kind=t_flaky attempt=1 elapsed_ms=[0-9.]+ class=tool error="node f \(t_flaky\): attempt 1 failed"\n`,
		`level=DEBUG msg=node.failed .* node=f kind=t_flaky attempt=2 .*class=tool`,
		`level=DEBUG msg=node.completed .* node=f kind=t_flaky attempt=3 elapsed_ms=[0-9.]+ branch=""\n`,
	} {
		if !regexp.MustCompile(want).MatchString(log) {
			t.Errorf("debug log lacks %s:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "msg=node."); n != 6 { // 4 attempts + 2 node.retry
		t.Errorf("%d node events, want 4 attempts and 2 retries:\n%s", n, log)
	}
	off := false
	if log := run("debug", &off); strings.Contains(log, "node.completed") || strings.Contains(log, "node.failed") {
		t.Errorf("node_events = false still logs node events:\n%s", log)
	}
	if log := run("info", nil); strings.Contains(log, "node.completed") || strings.Contains(log, "node.failed") {
		t.Errorf("info level logs node events:\n%s", log)
	}
}

// TestStartedNamesTriggerAndPrincipal: workflow.started says which
// trigger kind started the run and, when it has one, the principal.
func TestStartedNamesTriggerAndPrincipal(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	trig := MakeTrigger("http", map[string]any{"principal": map[string]any{"kind": "bearer", "name": "ops"}})
	runT(t, &Engine{Audit: l}, p, RunOptions{Trigger: trig})
	if !strings.Contains(buf.String(), `msg=workflow.started`) ||
		!strings.Contains(buf.String(), ` trigger=http principal_kind=bearer principal_name=ops`) {
		t.Fatalf("started event:\n%s", buf.String())
	}
	buf.Reset()
	runT(t, &Engine{Audit: l}, p, RunOptions{Trigger: MakeTrigger("event", map[string]any{"tick": 1})})
	if !strings.Contains(buf.String(), ` trigger=event`) || strings.Contains(buf.String(), "principal") {
		t.Fatalf("started event of a trigger run:\n%s", buf.String())
	}
}
