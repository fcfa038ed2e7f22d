package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnworks/kiln/runtime"
)

// maxListedCheckpoints bounds what one List reads: a fleet with more
// checkpoints than this lists (and resumes) the oldest first, the rest on
// a later call.
const maxListedCheckpoints = 1000

var _ runtime.CheckpointStore = (*Store)(nil)

func checkID(runID string) error {
	if !runtime.ValidCheckpointID(runID) {
		return fmt.Errorf("invalid run id %q", runID)
	}
	return nil
}

// Claim makes this replica the owner of runID: a new run gets a row with
// no checkpoint yet; an existing one is taken only when nobody owns it or
// its owner's lease has run out (the database's clock). The renew loop
// extends the lease while this process lives.
func (s *Store) Claim(ctx context.Context, runID string) (func(), error) {
	if err := checkID(runID); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `INSERT INTO kiln_checkpoints (run_id, owner, lease_until)
			VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until
			WHERE kiln_checkpoints.owner IS NULL OR kiln_checkpoints.lease_until <= now()`,
		runID, s.owner, s.leaseInterval())
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: claim run %s: %w", runID, err)
	}
	if tag.RowsAffected() != 1 {
		return nil, fmt.Errorf("run %s is %w (a replica whose lease on it is live)", runID, runtime.ErrRunHeld)
	}
	s.mu.Lock()
	s.runs[runID] = true
	s.mu.Unlock()
	return func() { s.releaseRun(runID) }, nil
}

// releaseRun gives the run up: its placeholder row goes (the run never
// checkpointed, or its checkpoint was deleted), a checkpoint stays,
// without owner. Should the database be away, the lease lapses instead.
func (s *Store) releaseRun(runID string) {
	s.mu.Lock()
	delete(s.runs, runID)
	s.mu.Unlock()
	ctx, cancel := s.bound(context.Background())
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM kiln_checkpoints WHERE run_id = $1 AND owner = $2 AND data IS NULL`, runID, s.owner)
	_, _ = s.pool.Exec(ctx, `UPDATE kiln_checkpoints SET owner = NULL, lease_until = NULL WHERE run_id = $1 AND owner = $2`, runID, s.owner)
}

func (s *Store) holds(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[runID]
}

// Save writes cp. A run this replica claimed is written only while it
// still owns it (fenced by owner): a replica whose lease ran out and whose
// run another replica took over cannot overwrite the newer checkpoint.
// An unclaimed save (a pause in a run that does not checkpoint each node)
// never replaces a run a live owner holds.
func (s *Store) Save(ctx context.Context, cp *runtime.Checkpoint) error {
	if err := checkID(cp.RunID); err != nil {
		return err
	}
	data, err := runtime.EncodeCheckpoint(cp)
	if err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.holds(cp.RunID) {
		tag, err := s.pool.Exec(ctx, `UPDATE kiln_checkpoints SET workflow = $3, state = $4, data = $5, saved_at = now()
			WHERE run_id = $1 AND owner = $2`, cp.RunID, s.owner, cp.Workflow, cp.State, data)
		if err != nil {
			return fmt.Errorf("checkpoint store: save run %s: %w", cp.RunID, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("checkpoint store: run %s was taken over by another replica (this replica's lease ran out); checkpoint not saved", cp.RunID)
		}
		return nil
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO kiln_checkpoints (run_id, workflow, state, data, saved_at)
			VALUES ($1, $2, $3, $4, now())
		ON CONFLICT (run_id) DO UPDATE SET workflow = EXCLUDED.workflow, state = EXCLUDED.state,
			data = EXCLUDED.data, saved_at = EXCLUDED.saved_at
			WHERE kiln_checkpoints.owner IS NULL OR kiln_checkpoints.lease_until <= now()`,
		cp.RunID, cp.Workflow, cp.State, data)
	if err != nil {
		return fmt.Errorf("checkpoint store: save run %s: %w", cp.RunID, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("run %s is %w; checkpoint not saved", cp.RunID, runtime.ErrRunHeld)
	}
	return nil
}

// Load reads runID's checkpoint and checks it as a file is checked.
func (s *Store) Load(ctx context.Context, runID string) (*runtime.Checkpoint, error) {
	if err := checkID(runID); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM kiln_checkpoints WHERE run_id = $1 AND data IS NOT NULL`, runID).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w for run %s in the state database", runtime.ErrNoCheckpoint, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: load run %s: %w", runID, err)
	}
	return runtime.DecodeCheckpoint(data, runID)
}

// List returns this workflow's checkpoints, oldest first (at most
// maxListedCheckpoints). Active is true while a live lease holds the run.
func (s *Store) List(ctx context.Context) ([]runtime.CheckpointInfo, []error, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT run_id, data, saved_at, coalesce(owner IS NOT NULL AND lease_until > now(), false)
		FROM kiln_checkpoints WHERE data IS NOT NULL AND ($1 = '' OR workflow = $1)
		ORDER BY saved_at, run_id LIMIT $2`, s.workflow, maxListedCheckpoints)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint store: list: %w", err)
	}
	defer rows.Close()
	var list []runtime.CheckpointInfo
	var bad []error
	for rows.Next() {
		var id string
		var data []byte
		var saved time.Time
		var active bool
		if err := rows.Scan(&id, &data, &saved, &active); err != nil {
			return nil, nil, fmt.Errorf("checkpoint store: list: %w", err)
		}
		cp, err := runtime.DecodeCheckpoint(data, id)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		list = append(list, runtime.CheckpointInfo{Checkpoint: cp, SavedAt: saved, Active: active})
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("checkpoint store: list: %w", err)
	}
	return list, bad, nil
}

// Delete removes runID's checkpoint when this replica owns the run or
// nobody live does.
func (s *Store) Delete(ctx context.Context, runID string) error {
	if err := checkID(runID); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM kiln_checkpoints WHERE run_id = $1
		AND (owner = $2 OR owner IS NULL OR lease_until <= now())`, runID, s.owner)
	if err != nil {
		return fmt.Errorf("checkpoint store: delete run %s: %w", runID, err)
	}
	return nil
}
