package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultRunRetention is how long a run record is kept when its route
// sets no run_retention_secs.
const DefaultRunRetention = 24 * time.Hour

// RunIDLen is the length of an async run's id: 32 lower-case hex digits
// (128 random bits, drawn by the http family from crypto/rand).
const RunIDLen = 32

// ValidRunID reports whether id has the shape of an async run's id. Every
// id a caller sends is checked with it before it reaches a store (the
// file store makes it a file name).
func ValidRunID(id string) bool {
	if len(id) != RunIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// RunStore keeps the status of runs accepted by async routes
// (reply = "async"), so GET /v1/runs/{id} can answer on any process that
// shares the store. The default keeps records under --state-dir (one
// host); the pgstate family shares them across hosts. See docs/serve.md.
type RunStore interface {
	// PutRun creates or replaces the record of rec.ID; it expires ttl
	// after now (ttl <= 0: the store's default).
	PutRun(ctx context.Context, rec RunRecord, ttl time.Duration) error
	// GetRun returns the record of id; ok is false when there is none (or
	// it expired).
	GetRun(ctx context.Context, id string) (rec RunRecord, ok bool, err error)
	// SweepRuns deletes expired records (housekeeping).
	SweepRuns(ctx context.Context)
}

// Run record states.
const (
	RunAccepted = "accepted" // answered 202, not started yet
	RunRunning  = "running"
	RunEnded    = "ended" // Outcome holds how it ended
	// RunInterrupted: a drain cut the run; its checkpoint is kept and the
	// server's next start continues it.
	RunInterrupted = "interrupted"
)

// RunRecord is one async run's status. Outcome is the run's outcome as
// its route would have replied it, already redacted: a store is a sink.
type RunRecord struct {
	ID      string          `json:"id"`
	Route   string          `json:"route"` // the route that accepted it: its auth guards the record
	State   string          `json:"state"`
	Outcome json.RawMessage `json:"outcome,omitempty"` // set when State is RunEnded
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

type runStoreKey struct{}

// SetRunStore installs the process's shared run store (a state backend's
// Setup does this); it replaces the file default.
func SetRunStore(s *Services, r RunStore) { s.Values.Store(runStoreKey{}, r) }

// RunStoreFor is the run store of e: the one a backend installed, else
// the file store under e.StateDir, else nil (no state directory: a server
// refuses an async route then, as it refuses a keyed one).
func RunStoreFor(e *Engine) RunStore {
	if r, ok := installed[RunStore](e, runStoreKey{}); ok {
		return r
	}
	if e.StateDir == "" {
		return nil
	}
	return NewFileRuns(e.StateDir, e.now)
}
