package pgstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilnworks/kiln/runtime"
)

// maxRunRecordBytes bounds one stored run record (its outcome included);
// a larger one is refused, not truncated.
const maxRunRecordBytes = maxReplyBytes

var _ runtime.RunStore = (*Store)(nil)

// PutRun creates or replaces rec; it expires ttl after now by the
// database's clock, so every replica agrees when.
func (s *Store) PutRun(ctx context.Context, rec runtime.RunRecord, ttl time.Duration) error {
	if !runtime.ValidRunID(rec.ID) {
		return fmt.Errorf("run store: invalid run id %q", rec.ID)
	}
	if ttl <= 0 {
		ttl = runtime.DefaultRunRetention
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("run store: encode run %s: %w", rec.ID, err)
	}
	if len(data) > maxRunRecordBytes {
		return fmt.Errorf("run store: the record of run %s is %d bytes, over the %d-byte limit; not stored", rec.ID, len(data), maxRunRecordBytes)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err = s.pool.Exec(ctx, `INSERT INTO kiln_runs (id, record, expires_at) VALUES ($1, $2, now() + $3::interval)
		ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, expires_at = EXCLUDED.expires_at`,
		rec.ID, data, pgInterval(ttl))
	if err != nil {
		return fmt.Errorf("run store: put run %s: %w", rec.ID, err)
	}
	return nil
}

// GetRun returns id's record unless it is missing or expired.
func (s *Store) GetRun(ctx context.Context, id string) (runtime.RunRecord, bool, error) {
	if !runtime.ValidRunID(id) {
		return runtime.RunRecord{}, false, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT record FROM kiln_runs WHERE id = $1 AND expires_at > now()`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return runtime.RunRecord{}, false, nil
	}
	if err != nil {
		return runtime.RunRecord{}, false, fmt.Errorf("run store: get run %s: %w", id, err)
	}
	var rec runtime.RunRecord
	if err := json.Unmarshal(data, &rec); err != nil || rec.ID != id {
		return runtime.RunRecord{}, false, fmt.Errorf("run store: the record of run %s does not decode", id)
	}
	return rec, true, nil
}

// SweepRuns deletes expired records, a bounded batch per call.
func (s *Store) SweepRuns(ctx context.Context) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `DELETE FROM kiln_runs WHERE id IN (
		SELECT id FROM kiln_runs WHERE expires_at <= now() LIMIT 10000)`)
}
