package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// Checkpoint is a saved run: enough to continue it in another process.
// It never holds secret values: its data (outputs, trigger, reason) is
// redacted when it is written, so a resumed run sees [REDACTED] where a
// secret value appeared in them. Its identifiers (run id, workflow, digest,
// node ids, state) are kiln's own and are written as they are, so a
// checkpoint stays resumable even under a short secret.
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

	file string // the file it was read from, for errors ("" = not read)
}

// checkpointFile is the strict file form of a Checkpoint: a nil field was
// missing (or null) in the file.
type checkpointFile struct {
	RunID          *string        `json:"run_id"`
	Workflow       *string        `json:"workflow"`
	WorkflowDigest *string        `json:"workflow_digest"`
	StartNode      *string        `json:"start_node"`
	State          *string        `json:"state"`
	Reason         string         `json:"reason"`
	PausedAt       string         `json:"paused_at"`
	NextNode       *string        `json:"next_node"`
	Trigger        map[string]any `json:"trigger"`
	Outputs        map[string]any `json:"outputs"`
	Loops          map[string]int `json:"loops"`
}

// maxCheckpointBytes bounds what reading one checkpoint file may take.
const maxCheckpointBytes = 256 << 20

// readCheckpoint reads and strictly checks the checkpoint file at path:
// one JSON object, no unknown field, every field present and valid, and
// its run id the one its file name says. Whether it fits a workflow (its
// digest, its node ids) is Program.CheckResume's part. Errors name the
// file.
func readCheckpoint(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %s", ErrNoCheckpoint, path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxCheckpointBytes+1))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %v", path, err)
	}
	if len(data) > maxCheckpointBytes {
		return nil, fmt.Errorf("checkpoint %s is larger than %d MiB; refused", path, maxCheckpointBytes>>20)
	}
	cp, err := decodeCheckpoint(data, strings.TrimSuffix(filepath.Base(path), ".json"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s is not valid: %v", path, err)
	}
	cp.file = path
	return cp, nil
}

// decodeError says what was wrong with a checkpoint in its own terms,
// not encoding/json's (Go type names).
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	want := "an object"
	switch te.Type.Kind() {
	case reflect.String:
		want = "a string"
	case reflect.Int:
		want = "an integer"
	}
	if te.Field == "" {
		return fmt.Errorf("the checkpoint is a JSON %s, want an object", te.Value)
	}
	return fmt.Errorf("field %s is a JSON %s, want %s", te.Field, te.Value, want)
}

func decodeCheckpoint(data []byte, runID string) (*Checkpoint, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // outputs keep their number text, as in a live run
	dec.DisallowUnknownFields()
	var f checkpointFile
	if err := dec.Decode(&f); err != nil {
		return nil, decodeError(err)
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the checkpoint object")
	}
	for _, req := range []struct {
		name  string
		isSet bool
	}{
		{"run_id", f.RunID != nil}, {"workflow", f.Workflow != nil}, {"workflow_digest", f.WorkflowDigest != nil},
		{"start_node", f.StartNode != nil}, {"state", f.State != nil}, {"next_node", f.NextNode != nil},
		{"trigger", f.Trigger != nil}, {"outputs", f.Outputs != nil}, {"loops", f.Loops != nil},
	} {
		if !req.isSet {
			return nil, fmt.Errorf("field %s is missing or null", req.name)
		}
	}
	cp := &Checkpoint{RunID: *f.RunID, Workflow: *f.Workflow, WorkflowDigest: *f.WorkflowDigest,
		StartNode: *f.StartNode, State: *f.State, Reason: f.Reason, PausedAt: f.PausedAt, NextNode: *f.NextNode,
		Trigger: f.Trigger, Outputs: f.Outputs, Loops: f.Loops}
	switch {
	case !validRunID(cp.RunID) || cp.RunID == "." || cp.RunID == "..":
		return nil, fmt.Errorf("run_id %q is not a valid run id", cp.RunID)
	case cp.RunID != runID:
		return nil, fmt.Errorf("run_id %q does not match the file name (run %s)", cp.RunID, runID)
	}
	switch cp.State {
	case CheckpointPaused, CheckpointIncomplete, CheckpointErrored:
	default:
		return nil, fmt.Errorf("state %q: want %s, %s or %s", cp.State, CheckpointPaused, CheckpointIncomplete, CheckpointErrored)
	}
	for k, v := range cp.Loops {
		if i, err := strconv.Atoi(k); err != nil || i < 0 || v < 0 {
			return nil, fmt.Errorf("loops entry %q: %d: want a non-negative edge index and count", k, v)
		}
	}
	return cp, nil
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
	if CheckpointStoreFor(r.Engine) == nil {
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
	return &Outcome{Status: StatusPaused, RunID: r.ID(), LastNode: pn.node.ID, Reason: reason}
}

func (r *Run) writeCheckpoint(next, state, reason string) error {
	store := CheckpointStoreFor(r.Engine)
	if store == nil {
		return Errorf(ClassConfig, "checkpointing needs a state directory (--state-dir)")
	}
	loops := map[string]int{}
	for k, v := range r.loops {
		loops[strconv.Itoa(k)] = v
	}
	cp := &Checkpoint{
		RunID: r.ID(), Workflow: r.Program.Workflow.Name, WorkflowDigest: r.Program.Workflow.Digest,
		StartNode: r.StartNode, State: state, Reason: reason, PausedAt: r.last, NextNode: next,
		Trigger: r.trigger, Outputs: r.Outputs(), Loops: loops,
	}
	if err := store.Save(context.Background(), cp); err != nil {
		return Errorf(ClassConfig, "%v", err)
	}
	return nil
}

// saveCheckpoint writes cp to path, encoded (and redacted) by
// EncodeCheckpoint.
func saveCheckpoint(path string, cp *Checkpoint) error {
	data, err := EncodeCheckpoint(cp)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %v", err)
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
	if cp.Trigger != nil {
		r.setTrigger(cp.Trigger)
	} else {
		r.setTrigger(MakeTrigger("manual", nil))
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
