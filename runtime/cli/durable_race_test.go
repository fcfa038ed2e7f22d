package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// racyCheckpoints stands in for a shared checkpoint store in which other
// processes act between this one's listing and its claim: "taken" is
// listed free but claimed meanwhile; "gone" is listed but finished
// meanwhile (claimable, no checkpoint left). Only the workflow named
// racyWorkflow gets it.
type racyCheckpoints struct{}

const racyWorkflow = "racy-store"

func init() {
	runtime.RegisterExtension(runtime.Extension{Name: "clitest-racy-store", Setup: func(_ context.Context, h *runtime.Host) error {
		if h.Program.Workflow.Name == racyWorkflow {
			runtime.SetCheckpointStore(h.Engine.Services, racyCheckpoints{})
		}
		return nil
	}})
}

func (racyCheckpoints) Save(context.Context, *runtime.Checkpoint) error { return nil }
func (racyCheckpoints) Delete(context.Context, string) error            { return nil }

func (racyCheckpoints) Load(_ context.Context, id string) (*runtime.Checkpoint, error) {
	return nil, fmt.Errorf("%w for run %s", runtime.ErrNoCheckpoint, id)
}

func (racyCheckpoints) List(context.Context) ([]runtime.CheckpointInfo, []error, error) {
	var list []runtime.CheckpointInfo
	for _, id := range []string{"taken", "gone"} {
		list = append(list, runtime.CheckpointInfo{SavedAt: time.Now(), Checkpoint: &runtime.Checkpoint{
			RunID: id, Workflow: racyWorkflow, StartNode: "main", State: runtime.CheckpointIncomplete, NextNode: "echo",
			Trigger: map[string]any{}, Outputs: map[string]any{}, Loops: map[string]int{}}})
	}
	return list, nil, nil
}

func (racyCheckpoints) Claim(_ context.Context, id string) (func(), error) {
	if id == "taken" {
		return nil, fmt.Errorf("run %s is %w", id, runtime.ErrRunHeld)
	}
	return func() {}, nil
}

// TestResumeIncompleteSkipsRunsOthersTook: runs another process claimed
// or finished between --resume-incomplete's listing and its claim are
// skipped (theirs, not a failure): exit 0, nothing refused or run.
func TestResumeIncompleteSkipsRunsOthersTook(t *testing.T) {
	wf := simpleWF(racyWorkflow, workflow.Node{ID: "echo", Type: "cli_echo"})
	r := run(t, wf, nil, "", "--resume-incomplete", "--state-dir", t.TempDir(), "--quiet")
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var results []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil || len(results) != 2 {
		t.Fatalf("%v %s", err, r.stdout)
	}
	for _, res := range results {
		if res["skipped"] == nil || res["outcome"] != nil || res["refused"] != nil {
			t.Errorf("run %v: %v, want skipped", res["run_id"], res)
		}
	}
}
