package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Durable runs. A checkpoint lives at <state-dir>/runs/<run-id>.json and is
// in one of three states:
//
//   - paused: written by pause_for_approval; --resume continues at the
//     pause node's successor.
//   - incomplete: written before the first node and after every node of a
//     run started with CheckpointEachNode; a run that is no longer executing
//     (the process died, e.g. SIGKILL) is resumed by --resume-incomplete at
//     the node it had not finished, which therefore runs again (at least
//     once, not exactly once).
//   - errored: the run ended errored or timed out after checkpointing; the
//     file is kept for inspection and an explicit --resume.
//
// A run that completes or fails removes its checkpoint. While a run that
// checkpoints executes, it holds an flock on runs/<run-id>.lock, released
// by the kernel when the process dies: that is how --resume-incomplete
// tells a crashed run from a live one, and why two processes can never
// resume the same run at once.

// Checkpoint states.
const (
	CheckpointPaused     = "paused"
	CheckpointIncomplete = "incomplete"
	CheckpointErrored    = "errored"
)

// LoadCheckpoint reads the checkpoint of runID under stateDir.
func LoadCheckpoint(stateDir, runID string) (*Checkpoint, error) {
	path, err := CheckpointPath(stateDir, runID)
	if err != nil {
		return nil, err
	}
	return readCheckpoint(path)
}

func readCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no checkpoint %s", path)
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // outputs keep their number text, as in a live run
	var cp Checkpoint
	if err := dec.Decode(&cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is not valid: %v", path, err)
	}
	if cp.Outputs == nil {
		cp.Outputs = map[string]any{}
	}
	return &cp, nil
}

// CheckpointInfo is one entry of ListCheckpoints.
type CheckpointInfo struct {
	*Checkpoint
	SavedAt time.Time
	// Active is true while a process is executing the run.
	Active bool
}

// ListCheckpoints returns every checkpoint under stateDir, oldest first.
func ListCheckpoints(stateDir string) ([]CheckpointInfo, error) {
	paths, err := filepath.Glob(filepath.Join(stateDir, "runs", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []CheckpointInfo
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			continue // removed meanwhile: the run finished
		}
		cp, err := readCheckpoint(p)
		if err != nil {
			return nil, err
		}
		out = append(out, CheckpointInfo{Checkpoint: cp, SavedAt: st.ModTime(), Active: runActive(stateDir, cp.RunID)})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SavedAt.Equal(out[j].SavedAt) {
			return out[i].SavedAt.Before(out[j].SavedAt)
		}
		return out[i].RunID < out[j].RunID
	})
	return out, nil
}

// CheckResume reports why cp cannot be resumed by p, or nil.
func (p *Program) CheckResume(cp *Checkpoint) error {
	if cp.WorkflowDigest != p.Workflow.Digest {
		return Errorf(ClassConfig, "checkpoint %s was written by a different workflow (digest %.12s, this workflow %.12s); refusing to resume",
			cp.RunID, cp.WorkflowDigest, p.Workflow.Digest)
	}
	switch cp.State {
	case CheckpointPaused, CheckpointIncomplete, CheckpointErrored:
	default:
		return Errorf(ClassConfig, "checkpoint %s has unknown state %q", cp.RunID, cp.State)
	}
	if cp.NextNode != "" {
		if _, ok := p.nodes[cp.NextNode]; !ok {
			return Errorf(ClassConfig, "checkpoint %s resumes at unknown node %q", cp.RunID, cp.NextNode)
		}
	}
	return nil
}

func lockPath(stateDir, runID string) (string, error) {
	p, err := CheckpointPath(stateDir, runID)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(p, ".json") + ".lock", nil
}

// lockRun takes runID's exclusive, non-blocking lock.
func lockRun(stateDir, runID string) (unlock func(), err error) {
	path, err := lockPath(stateDir, runID)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, held, err := TryLockFile(path)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, fmt.Errorf("run %s is executing in another process", runID)
	}
	return func() { f.Close() }, nil // closing the descriptor releases the lock
}

// runActive reports whether another process holds runID's lock.
func runActive(stateDir, runID string) bool {
	path, err := lockPath(stateDir, runID)
	if err != nil {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// durable wraps execute for the top-level run: the run lock, the first
// checkpoint of a CheckpointEachNode run, resume checks, and settling the
// checkpoint when the run ends. A resumed checkpoint must be the one on
// disk under the engine's StateDir: it is re-read there under the lock.
func (r *Run) durable(ctx context.Context, opts RunOptions) *Outcome {
	cp := opts.Resume
	if cp == nil && !opts.CheckpointEachNode {
		return r.execute(ctx, opts)
	}
	dir := r.Engine.StateDir
	if dir == "" {
		return r.errored(Errorf(ClassConfig, "checkpointing and resuming need a state directory (--state-dir)"))
	}
	unlock, err := lockRun(dir, r.ExecutionID)
	if err != nil {
		return r.errored(Errorf(ClassConfig, "%v", err))
	}
	defer unlock()
	if cp != nil {
		// Re-read under the lock: another process may have finished or
		// resumed the run since the caller loaded it.
		if cp, err = LoadCheckpoint(dir, cp.RunID); err != nil {
			return r.errored(Errorf(ClassConfig, "resume %s: %v", r.ExecutionID, err))
		}
		if err := r.Program.CheckResume(cp); err != nil {
			return r.errored(err)
		}
		opts.Resume = cp
		// A resumed run is a durable run: it checkpoints after every node,
		// so a crash or an error later on resumes from where it stopped.
		opts.CheckpointEachNode = true
		if cp.NextNode == "" {
			// A pause at a dead end: resuming completes with its output.
			r.last = cp.PausedAt
			out := r.completed(cp.Outputs[cp.PausedAt])
			r.settle(out)
			return out
		}
	} else if entry, err := r.Program.Entry(r.StartNode); err == nil {
		// Before the first node, so a crash in it is resumable too.
		if err := r.writeCheckpoint(entry, CheckpointIncomplete, ""); err != nil {
			return r.errored(err)
		}
	}
	out := r.execute(ctx, opts)
	r.settle(out)
	return out
}

// settle removes the checkpoint of a run that completed or failed, and
// marks the one of a run that errored or timed out.
func (r *Run) settle(out *Outcome) {
	dir := r.Engine.StateDir
	path, err := CheckpointPath(dir, r.ExecutionID)
	if err != nil {
		return
	}
	switch out.Status {
	case StatusPaused:
		return
	case StatusCompleted, StatusFailed:
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.auditf(slog.LevelWarn, "checkpoint.remove_failed", "error", err.Error())
			return
		}
		if lp, err := lockPath(dir, r.ExecutionID); err == nil {
			_ = os.Remove(lp)
		}
		return
	}
	cp, err := readCheckpoint(path)
	if err != nil {
		return
	}
	cp.State = CheckpointErrored
	cp.Reason = Redact(out.Reason)
	if out.Status == StatusTimedOut {
		cp.Reason = "timed out"
	}
	data, err := EncodeJSONIndent(cp)
	if err == nil {
		err = WriteFileAtomic(path, RedactBytes(data), 0o600)
	}
	if err != nil {
		r.auditf(slog.LevelWarn, "checkpoint.write_failed", "error", err.Error())
	}
}
