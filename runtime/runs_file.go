package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MaxRunRecordBytes bounds one run record on disk: a larger record is
// refused when written and ignored when read (the http family stores a
// marker instead of an outcome this large).
const MaxRunRecordBytes = 2 << 20

// FileRuns is the default RunStore: one file per run under
// <state-dir>/async/, named by the run's id (checked with ValidRunID
// first) and replaced atomically, so a reader sees the last whole record.
// Several processes on one host may share the directory.
type FileRuns struct {
	dir string
	now func() time.Time
}

// fileRun is a record as stored: the record and when it expires.
type fileRun struct {
	RunRecord
	Expires time.Time `json:"expires"`
}

// NewFileRuns returns the file store under stateDir.
func NewFileRuns(stateDir string, now func() time.Time) *FileRuns {
	return &FileRuns{dir: filepath.Join(stateDir, "async"), now: now}
}

func (s *FileRuns) path(id string) string { return filepath.Join(s.dir, id+".json") }

// PutRun implements RunStore.
func (s *FileRuns) PutRun(_ context.Context, rec RunRecord, ttl time.Duration) error {
	if !ValidRunID(rec.ID) {
		return fmt.Errorf("run store: %q is not a run id", rec.ID)
	}
	if ttl <= 0 {
		ttl = DefaultRunRetention
	}
	data, err := json.Marshal(fileRun{RunRecord: rec, Expires: s.now().Add(ttl)})
	if err != nil {
		return fmt.Errorf("run store: %w", err)
	}
	if len(data) > MaxRunRecordBytes {
		return fmt.Errorf("run store: the record of run %s is %d bytes, over the %d-byte limit", rec.ID, len(data), MaxRunRecordBytes)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("run store: %w", err)
	}
	if err := WriteFileAtomic(s.path(rec.ID), data, 0o600); err != nil {
		return fmt.Errorf("run store: %w", err)
	}
	return nil
}

// GetRun implements RunStore. An id that is not a run id is not found.
func (s *FileRuns) GetRun(_ context.Context, id string) (RunRecord, bool, error) {
	if !ValidRunID(id) {
		return RunRecord{}, false, nil
	}
	r, ok, err := s.read(s.path(id))
	if err != nil || !ok || !s.now().Before(r.Expires) {
		return RunRecord{}, false, err
	}
	return r.RunRecord, true, nil
}

// read loads one record; a missing file is not an error.
func (s *FileRuns) read(path string) (fileRun, bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileRun{}, false, nil
	}
	if err != nil {
		return fileRun{}, false, fmt.Errorf("run store: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRunRecordBytes+1))
	if err != nil {
		return fileRun{}, false, fmt.Errorf("run store: %w", err)
	}
	if len(data) > MaxRunRecordBytes {
		return fileRun{}, false, fmt.Errorf("run store: %s is over the %d-byte limit", filepath.Base(path), MaxRunRecordBytes)
	}
	var r fileRun
	if err := json.Unmarshal(data, &r); err != nil {
		return fileRun{}, false, fmt.Errorf("run store: %s: %w", filepath.Base(path), err)
	}
	return r, true, nil
}

// SweepRuns implements RunStore: expired records go, and so do records
// that no longer parse (nothing could ever read them).
func (s *FileRuns) SweepRuns(context.Context) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	now := s.now()
	for _, de := range entries {
		id, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !ValidRunID(id) || !de.Type().IsRegular() {
			continue
		}
		r, ok, err := s.read(s.path(id))
		if err != nil || (ok && !now.Before(r.Expires)) {
			_ = os.Remove(s.path(id))
		}
	}
}
