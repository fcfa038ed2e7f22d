package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// CheckpointStore keeps the checkpoints of durable runs and who is
// executing each run. The default is FileCheckpoints under --state-dir
// (one host: flock run locks); the pgstate family shares checkpoints and
// run owners across hosts, so a run paused or crashed on one replica
// resumes on another. See docs/durable-runs.md and docs/scaling.md.
type CheckpointStore interface {
	// Save creates or replaces cp (encode it with EncodeCheckpoint, which
	// redacts it). A run executing in another live process is refused.
	Save(ctx context.Context, cp *Checkpoint) error
	// Load returns runID's checkpoint; a missing one is an error naming
	// the run.
	Load(ctx context.Context, runID string) (*Checkpoint, error)
	// List returns every checkpoint, oldest first; one that does not
	// decode is left out and reported in bad. err: the store cannot be read.
	List(ctx context.Context) (list []CheckpointInfo, bad []error, err error)
	// Delete removes runID's checkpoint (the run completed or failed).
	Delete(ctx context.Context, runID string) error
	// Claim makes this process the owner of runID while it executes it:
	// no other process may claim, save over or delete it until release.
	// A live owner elsewhere gives an error wrapping ErrRunHeld. The
	// owner's hold is renewed while the process lives (the file store's
	// flock dies with the process; a shared store renews a lease) and
	// lapses when it dies, so --resume-incomplete can take the run over.
	Claim(ctx context.Context, runID string) (release func(), err error)
}

var (
	// ErrRunHeld: another live process is executing the run.
	ErrRunHeld = errors.New("executing in another process")
	// ErrNoCheckpoint: the run has no checkpoint (it finished, or never
	// paused or checkpointed).
	ErrNoCheckpoint = errors.New("no checkpoint")
	// ErrRunMoved: the run's checkpoint changed since the caller read it
	// (another process resumed it meanwhile).
	ErrRunMoved = errors.New("moved on since its checkpoint was read (another process resumed it)")
)

// TakenElsewhere reports whether a resume's error says another process
// (a replica sharing the state) took the run between the caller's listing
// and its claim: it holds the run, finished it, or moved it on. Such a
// run is theirs, not a failure, and is skipped.
func TakenElsewhere(err error) bool {
	return errors.Is(err, ErrRunHeld) || errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrRunMoved)
}

type checkpointStoreKey struct{}

// SetCheckpointStore installs the process's shared checkpoint store (a
// state backend's Setup does this); it replaces the file default.
func SetCheckpointStore(s *Services, c CheckpointStore) {
	s.Values.Store(checkpointStoreKey{}, c)
}

// CheckpointStoreFor returns the engine's checkpoint store: the installed
// backend, else the file store under StateDir, else nil (no state:
// pausing and durable runs are refused).
func CheckpointStoreFor(e *Engine) CheckpointStore {
	if c, ok := installed[CheckpointStore](e, checkpointStoreKey{}); ok {
		return c
	}
	if e.StateDir == "" {
		return nil
	}
	return FileCheckpoints{Dir: e.StateDir}
}

// EncodeCheckpoint is the stored form of cp: JSON with its data redacted
// (a checkpoint is a sink: no registered secret value is ever written
// out). cp itself, the run's own values, is not changed.
func EncodeCheckpoint(cp *Checkpoint) ([]byte, error) {
	red := *cp
	red.Reason = Redact(cp.Reason)
	red.Trigger, _ = RedactTree(cp.Trigger).(map[string]any)
	red.Outputs, _ = RedactTree(cp.Outputs).(map[string]any)
	// Never null: a reader refuses a checkpoint with a field missing.
	if red.Trigger == nil {
		red.Trigger = map[string]any{}
	}
	if red.Outputs == nil {
		red.Outputs = map[string]any{}
	}
	if red.Loops == nil {
		red.Loops = map[string]int{}
	}
	data, err := EncodeJSONIndent(&red)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %v", err)
	}
	return data, nil
}

// DecodeCheckpoint strictly decodes a stored checkpoint of runID (see
// readCheckpoint): a store that is not a file checks what it reads the
// same way.
func DecodeCheckpoint(data []byte, runID string) (*Checkpoint, error) {
	if len(data) > maxCheckpointBytes {
		return nil, fmt.Errorf("checkpoint of run %s is larger than %d MiB; refused", runID, maxCheckpointBytes>>20)
	}
	cp, err := decodeCheckpoint(data, runID)
	if err != nil {
		return nil, fmt.Errorf("checkpoint of run %s is not valid: %v", runID, err)
	}
	return cp, nil
}

// ValidCheckpointID reports whether id may name a durable run (1..128 of
// [A-Za-z0-9_.-], not "." or ".."), as every store requires.
func ValidCheckpointID(id string) bool { return validRunID(id) && id != "." && id != ".." }

// FileCheckpoints is the file CheckpointStore: <Dir>/runs/<run-id>.json,
// and an flock on <run-id>.lock while a process executes the run.
type FileCheckpoints struct{ Dir string }

var _ CheckpointStore = FileCheckpoints{}

func (f FileCheckpoints) Save(_ context.Context, cp *Checkpoint) error {
	path, err := CheckpointPath(f.Dir, cp.RunID)
	if err != nil {
		return err
	}
	return saveCheckpoint(path, cp)
}

func (f FileCheckpoints) Load(_ context.Context, runID string) (*Checkpoint, error) {
	return LoadCheckpoint(f.Dir, runID)
}

func (f FileCheckpoints) List(context.Context) ([]CheckpointInfo, []error, error) {
	return ListCheckpoints(f.Dir)
}

// Delete removes the checkpoint, then the run's lock file (the caller
// still holds its lock, so nobody can take the run meanwhile).
func (f FileCheckpoints) Delete(_ context.Context, runID string) error {
	path, err := CheckpointPath(f.Dir, runID)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if lp, err := lockPath(f.Dir, runID); err == nil {
		_ = os.Remove(lp)
	}
	return nil
}

func (f FileCheckpoints) Claim(_ context.Context, runID string) (func(), error) {
	return lockRun(f.Dir, runID)
}
