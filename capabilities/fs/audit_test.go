package fs

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestEffectsAudited: each file the run touches is audited as
// effect.allowed with the resolved path, so the audit log answers what a
// run wrote; a denied write audits the denial, not an effect.
func TestEffectsAudited(t *testing.T) {
	e := setup(t)
	var buf bytes.Buffer
	audit, _, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	e.engine.Audit = audit
	dir := filepath.Join(e.allowed, "sub")
	file := filepath.Join(dir, "out.txt")
	rep := e.run(t, map[string]any{"path": file, "content": "x", "dir": dir}, false,
		workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"}, writeNode("w"),
		workflow.Node{ID: "r", Type: "read_file", PathFrom: "trigger.path"})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	for _, want := range []string{
		"msg=effect.allowed execution_id=" + rep.ExecutionID + " workflow=t node=mk kind=create_dir effect=fs.create_dir target=" + dir + "\n",
		" node=w kind=write_file effect=fs.write target=" + file + "\n",
		" node=r kind=read_file effect=fs.read target=" + file + "\n",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("audit lacks %q:\n%s", want, buf.String())
		}
	}

	buf.Reset()
	rep = e.run(t, map[string]any{"path": filepath.Join(e.outside, "x"), "content": "x"}, false, writeNode("w"))
	if rep.Outcome.Status == runtime.StatusCompleted || strings.Contains(buf.String(), "effect.allowed") ||
		!strings.Contains(buf.String(), "policy.denied") {
		t.Fatalf("denied write: %+v\n%s", rep.Outcome, buf.String())
	}
}
