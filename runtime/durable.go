package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
//     file is kept for inspection and an explicit --resume. A run cut by
//     cancellation (its process shutting down) is not errored: its
//     checkpoint stays incomplete.
//
// A run that completes or fails removes its checkpoint. While a run that
// checkpoints executes, it holds an flock on runs/<run-id>.lock, released
// by the kernel when the process dies: that is how --resume-incomplete
// tells a crashed run from a live one, and why two processes can never
// resume the same run at once. That is the file store (FileCheckpoints,
// checkpoint_store.go); a shared store (pgstate) keeps the same states in
// the database and an owner lease, renewed while its process lives, in
// place of the flock.

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

// CheckpointInfo is one entry of ListCheckpoints.
type CheckpointInfo struct {
	*Checkpoint
	SavedAt time.Time
	// Active is true while a process is executing the run.
	Active bool
}

// ListCheckpoints returns every checkpoint under stateDir, oldest first.
// A file that is not a valid checkpoint is left out of the list and
// reported in bad, one error per file, naming it. err is set only when the
// directory cannot be read.
func ListCheckpoints(stateDir string) (list []CheckpointInfo, bad []error, err error) {
	dir := filepath.Join(stateDir, "runs")
	// Names only, unsorted: the list is sorted below, and os.ReadDir's
	// sort of DirEntry values adds about 10 KiB to every sealed binary.
	names, err := readDirNames(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for _, name := range names {
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue // temp files of WriteFileAtomic start with a dot
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p)
		if err != nil {
			continue // removed meanwhile: the run finished
		}
		if st.IsDir() {
			continue
		}
		cp, err := readCheckpoint(p)
		if err != nil {
			if _, serr := os.Stat(p); errors.Is(serr, fs.ErrNotExist) {
				continue // removed while it was read
			}
			bad = append(bad, err)
			continue
		}
		list = append(list, CheckpointInfo{Checkpoint: cp, SavedAt: st.ModTime(), Active: runActive(stateDir, cp.RunID)})
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].SavedAt.Equal(list[j].SavedAt) {
			return list[i].SavedAt.Before(list[j].SavedAt)
		}
		return list[i].RunID < list[j].RunID
	})
	return list, bad, nil
}

// readDirNames lists the names in dir, in directory order.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// CheckResume reports why cp cannot be resumed by p, or nil: it must come
// from this workflow (same digest), and every node and start node it names
// must be one of p's.
func (p *Program) CheckResume(cp *Checkpoint) error {
	why := p.resumeProblem(cp)
	if why == "" {
		return nil
	}
	where := cp.file
	if where == "" {
		where = cp.RunID
	}
	return Errorf(ClassConfig, "checkpoint %s %s; refusing to resume", where, why)
}

// resumeProblem is CheckResume's reason, "" when there is none.
func (p *Program) resumeProblem(cp *Checkpoint) string {
	if cp.WorkflowDigest != p.Workflow.Digest {
		return fmt.Sprintf("was written by a different workflow (digest %.12s, this workflow %.12s)", cp.WorkflowDigest, p.Workflow.Digest)
	}
	switch cp.State {
	case CheckpointPaused, CheckpointIncomplete, CheckpointErrored:
	default:
		return "has unknown state " + strconv.Quote(cp.State)
	}
	if _, err := p.Entry(cp.StartNode); err != nil {
		return "names unknown start node " + strconv.Quote(cp.StartNode)
	}
	for _, id := range []string{cp.NextNode, cp.PausedAt} {
		if _, ok := p.nodes[id]; id != "" && !ok {
			return "names unknown node " + strconv.Quote(id)
		}
	}
	for _, id := range SortedKeys(cp.Outputs) {
		if _, ok := p.nodes[id]; !ok {
			return "holds the output of unknown node " + strconv.Quote(id)
		}
	}
	for k := range cp.Loops {
		if i, err := strconv.Atoi(k); err != nil || i < 0 || i >= len(p.Workflow.Edges) {
			return "counts loops of unknown edge " + strconv.Quote(k)
		}
	}
	return ""
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
		return nil, fmt.Errorf("run %s is %w", runID, ErrRunHeld)
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

// durable wraps execute for the top-level run: the run's claim (its
// owner lease), the first checkpoint of a CheckpointEachNode run, resume
// checks, and settling the checkpoint when the run ends. A resumed
// checkpoint must be the one in the engine's checkpoint store: it is
// re-read there once the run is claimed.
func (r *Run) durable(ctx context.Context, opts RunOptions) *Outcome {
	cp := opts.Resume
	if cp == nil && !opts.CheckpointEachNode {
		return r.execute(ctx, opts)
	}
	store := CheckpointStoreFor(r.Engine)
	if store == nil {
		return r.errored(Errorf(ClassConfig, "checkpointing and resuming need a state directory (--state-dir)"))
	}
	release, err := store.Claim(ctx, r.ID())
	if err != nil {
		return r.errored(&Error{Class: ClassConfig, Msg: err.Error(), Err: err})
	}
	defer release()
	if cp != nil {
		// Re-read once claimed: another process may have finished or
		// resumed the run since the caller loaded it. One that moved on
		// (paused again, or at another node) is not resumed on the
		// strength of the old read: --resume-incomplete resumes only
		// what is still incomplete.
		was := cp
		if cp, err = store.Load(ctx, was.RunID); err != nil {
			return r.errored(&Error{Class: ClassConfig, Msg: fmt.Sprintf("resume %s: %v", r.ID(), err), Err: err})
		}
		if cp.State != was.State || cp.NextNode != was.NextNode || cp.PausedAt != was.PausedAt {
			return r.errored(&Error{Class: ClassConfig, Msg: fmt.Sprintf("resume %s: the run %v", r.ID(), ErrRunMoved), Err: ErrRunMoved})
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
			r.settle(store, out)
			return out
		}
	} else if entry, err := r.Program.Entry(r.StartNode); err == nil {
		// Before the first node, so a crash in it is resumable too.
		if err := r.writeCheckpoint(entry, CheckpointIncomplete, ""); err != nil {
			return r.errored(err)
		}
	}
	out := r.execute(ctx, opts)
	if out.Status == StatusErrored && errors.Is(ctx.Err(), context.Canceled) {
		// Cut by its process going away (a signal, a server's drain), not
		// failed: the checkpoint stays incomplete at the node it had not
		// finished, so --resume-incomplete, or the server's next start
		// for an async route, continues it.
		r.auditf(slog.LevelWarn, "checkpoint.kept", "detail", "run cut by shutdown; resumable")
		return out
	}
	r.settle(store, out)
	return out
}

// settle removes the checkpoint of a run that completed or failed, and
// marks the one of a run that errored or timed out. It runs even when
// the run's context was cancelled: the store's own bounds apply.
func (r *Run) settle(store CheckpointStore, out *Outcome) {
	ctx := context.Background()
	switch out.Status {
	case StatusPaused:
		return
	case StatusCompleted, StatusFailed:
		if err := store.Delete(ctx, r.ID()); err != nil {
			r.auditf(slog.LevelWarn, "checkpoint.remove_failed", "error", err.Error())
		}
		return
	}
	cp, err := store.Load(ctx, r.ID())
	if err != nil {
		r.auditf(slog.LevelWarn, "checkpoint.write_failed", "error", err.Error())
		return
	}
	cp.State = CheckpointErrored
	cp.Reason = out.Reason
	if out.Status == StatusTimedOut {
		cp.Reason = "timed out"
	}
	if err := store.Save(ctx, cp); err != nil {
		r.auditf(slog.LevelWarn, "checkpoint.write_failed", "error", err.Error())
	}
}
