package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Checkpoint is a saved run: enough to continue it in another process.
// It never holds secret values: node outputs that carried a secret were
// already redacted by their handlers.
type Checkpoint struct {
	RunID          string         `json:"run_id"`
	Workflow       string         `json:"workflow"`
	WorkflowDigest string         `json:"workflow_digest"`
	StartNode      string         `json:"start_node"`
	State          string         `json:"state"` // paused | incomplete | errored (durable.go)
	Reason         string         `json:"reason,omitempty"`
	PausedAt       string         `json:"paused_at,omitempty"` // node id of the pause
	NextNode       string         `json:"next_node"`
	Trigger        map[string]any `json:"trigger"`
	Outputs        map[string]any `json:"outputs"`
	// Loops holds loop-edge counters by edge index, so a resumed run
	// keeps its loop budgets (the reference reset them).
	Loops map[string]int `json:"loops"`
}

// validRunID accepts 1..128 characters of [A-Za-z0-9_.-]. A loop, not a
// regexp: package regexp adds ~250 KiB to every sealed binary.
func validRunID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// CheckpointPath is where a run's checkpoint lives under stateDir.
func CheckpointPath(stateDir, runID string) (string, error) {
	if !validRunID(runID) || runID == "." || runID == ".." {
		return "", fmt.Errorf("invalid run id %q", runID)
	}
	return filepath.Join(stateDir, "runs", runID+".json"), nil
}

func (r *Run) pause(pn *programNode, reason string) *Outcome {
	if reason == "" {
		reason = "approval required"
	}
	if r.Depth > 0 {
		return r.errored(&Error{Class: ClassWorkflow, Node: pn.node.ID, Kind: pn.node.Type,
			Msg: "pause_for_approval inside a child workflow is not supported; pause the top-level run"})
	}
	if r.Engine.StateDir == "" {
		return r.errored(&Error{Class: ClassConfig, Node: pn.node.ID, Kind: pn.node.Type,
			Msg: "pause_for_approval needs a state directory (--state-dir)"})
	}
	// The successor is chosen as traversal would choose it, so a loop edge
	// out of the pause is counted and its counter saved.
	next, err := r.selectEdge(pn, "")
	if err != nil {
		return r.errored(err)
	}
	if err := r.writeCheckpoint(next, "paused", reason); err != nil {
		return r.errored(err)
	}
	return &Outcome{Status: StatusPaused, RunID: r.ExecutionID, LastNode: pn.node.ID, Reason: reason}
}

func (r *Run) writeCheckpoint(next, state, reason string) error {
	if r.Engine.StateDir == "" {
		return Errorf(ClassConfig, "checkpointing needs a state directory (--state-dir)")
	}
	path, err := CheckpointPath(r.Engine.StateDir, r.ExecutionID)
	if err != nil {
		return Errorf(ClassConfig, "%v", err)
	}
	loops := map[string]int{}
	for k, v := range r.loops {
		loops[strconv.Itoa(k)] = v
	}
	cp := &Checkpoint{
		RunID: r.ExecutionID, Workflow: r.Program.Workflow.Name, WorkflowDigest: r.Program.Workflow.Digest,
		StartNode: r.StartNode, State: state, Reason: reason, PausedAt: r.last, NextNode: next,
		Trigger: r.trigger, Outputs: r.Outputs(), Loops: loops,
	}
	data, err := EncodeJSONIndent(cp)
	if err != nil {
		return Errorf(ClassConfig, "encode checkpoint: %v", err)
	}
	// Belt and braces: no registered secret value is ever written to disk.
	if err := WriteFileAtomic(path, RedactBytes(data), 0o600); err != nil {
		return Errorf(ClassConfig, "write checkpoint: %v", err)
	}
	return nil
}

func (r *Run) restore(cp *Checkpoint) error {
	if cp.WorkflowDigest != r.Program.Workflow.Digest {
		return Errorf(ClassConfig, "checkpoint %s was written by a different workflow (digest %.12s, this workflow %.12s)",
			cp.RunID, cp.WorkflowDigest, r.Program.Workflow.Digest)
	}
	if cp.NextNode == "" {
		return Errorf(ClassWorkflow, "checkpoint %s has no node to resume at", cp.RunID)
	}
	r.ExecutionID = cp.RunID
	r.trace.ExecutionID = cp.RunID
	r.StartNode = cp.StartNode
	r.trigger = cp.Trigger
	if r.trigger == nil {
		r.trigger = MakeTrigger("manual", nil)
	}
	for k, v := range cp.Outputs {
		if pn, ok := r.Program.nodes[k]; ok { // same digest: every key is a node
			r.outputs[pn.pos] = nodeOutput{v, true}
		}
	}
	for k, v := range cp.Loops {
		i, err := strconv.Atoi(k)
		if err == nil {
			if r.loops == nil {
				r.loops = map[int]int{}
			}
			r.loops[i] = v
		}
	}
	return nil
}

// WriteFileAtomic writes data to a temp file in path's directory and
// renames it over path, so readers never see a half-written file.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
