package runtime

import (
	"context"
	"time"
)

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
)

// RunRecord is one async run's status. Outcome is the run's outcome as
// its route would have replied it, already redacted: a store is a sink.
type RunRecord struct {
	ID      string    `json:"id"`
	Route   string    `json:"route"` // the route that accepted it: its auth guards the record
	State   string    `json:"state"`
	Outcome []byte    `json:"outcome,omitempty"` // JSON; set when State is RunEnded
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

type runStoreKey struct{}

// SetRunStore installs the process's shared run store (a state backend's
// Setup does this); it replaces the file default.
func SetRunStore(s *Services, r RunStore) { s.Values.Store(runStoreKey{}, r) }

// installedRunStore returns the run store a backend installed, or nil.
func installedRunStore(e *Engine) RunStore {
	if e.Services != nil {
		if r, ok := e.Services.Values.Load(runStoreKey{}); ok {
			return r.(RunStore)
		}
	}
	return nil
}
