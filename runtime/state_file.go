package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// FileClaims is the default ClaimStore: replies under
// <state-dir>/idempotency/, one file per (scope, key), written
// atomically.
//
// A claim is an exclusive flock on the pair's .lock file, held for the
// whole run: every process sharing the state directory sees it (two
// servers cannot both run one key), and it dies with its process, so the
// key of a crashed run is free again at once. flock is not reliable over
// NFS: processes on several hosts need a shared backend (docs/scaling.md).
type FileClaims struct {
	dir string
	now func() time.Time

	mu   sync.Mutex
	held map[string]*os.File // path -> lock file of each claim this process holds
}

// FileClaimRecord is one file: an in-flight marker or a recorded reply.
type FileClaimRecord struct {
	State       string `json:"state"` // in_flight | done
	Route       string `json:"route"`
	CreatedMS   int64  `json:"created_unix_ms"`
	ExpiresMS   int64  `json:"expires_unix_ms,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

// NewFileClaims returns the file store under stateDir.
func NewFileClaims(stateDir string, now func() time.Time) *FileClaims {
	return &FileClaims{dir: filepath.Join(stateDir, "idempotency"), now: now, held: map[string]*os.File{}}
}

// Path names the file of a (scope, key) pair; the key itself is never
// stored.
func (s *FileClaims) Path(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\n" + key))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".json")
}

// ClaimLockPath is the lock file that guards the record at path.
func ClaimLockPath(path string) string { return strings.TrimSuffix(path, ".json") + ".lock" }

// lock takes the claim lock of path without waiting; ok is false while
// another holder (this process or another) has it.
func (s *FileClaims) lock(path string) (f *os.File, ok bool, err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("idempotency store: %w", err)
	}
	f, ok, err = TryLockFile(ClaimLockPath(path))
	if err != nil {
		return nil, false, fmt.Errorf("idempotency store: %w", err)
	}
	return f, ok, nil
}

// Begin claims (scope, key). The in-flight marker of a run whose process
// is gone (we got its lock) is taken over.
func (s *FileClaims) Begin(_ context.Context, scope, key string) (Claim, error) {
	path := s.Path(scope, key)
	f, ok, err := s.lock(path)
	if err != nil || !ok {
		return Claim{Outcome: ClaimInFlight}, err
	}
	release := true
	defer func() {
		if release {
			f.Close() // closing the descriptor releases the lock
		}
	}()
	now := s.now()
	var takenOver bool
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Claim{}, fmt.Errorf("idempotency store: %w", err)
	default:
		var old FileClaimRecord
		if err := json.Unmarshal(data, &old); err != nil {
			return Claim{}, fmt.Errorf("idempotency store: %s is corrupt: %v", filepath.Base(path), err)
		}
		switch old.State {
		case "done":
			if now.UnixMilli() < old.ExpiresMS {
				return Claim{Outcome: ClaimReplay, Reply: &StoredReply{Status: old.Status, ContentType: old.ContentType, Body: old.Body}}, nil
			}
		case "in_flight":
			takenOver = true // we hold the lock: its run is gone
		}
	}
	marker := FileClaimRecord{State: "in_flight", Route: scope, CreatedMS: now.UnixMilli()}
	if err := s.write(path, &marker); err != nil {
		return Claim{}, err
	}
	s.mu.Lock()
	s.held[path] = f
	s.mu.Unlock()
	release = false
	return Claim{Outcome: ClaimRun, TakenOver: takenOver}, nil
}

// unlock releases the claim of path this process holds.
func (s *FileClaims) unlock(path string) {
	s.mu.Lock()
	f := s.held[path]
	delete(s.held, path)
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// Finish records a reply for ttl and releases the claim.
func (s *FileClaims) Finish(_ context.Context, scope, key string, ttl time.Duration, r StoredReply) error {
	path := s.Path(scope, key)
	defer s.unlock(path)
	now := s.now()
	e := FileClaimRecord{State: "done", Route: scope, CreatedMS: now.UnixMilli(), ExpiresMS: now.Add(ttl).UnixMilli(),
		Status: r.Status, ContentType: r.ContentType, Body: r.Body}
	return s.write(path, &e)
}

// Abandon forgets a claim, so the key stays retryable (failed runs).
func (s *FileClaims) Abandon(_ context.Context, scope, key string) error {
	path := s.Path(scope, key)
	defer s.unlock(path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

func (s *FileClaims) write(path string, e *FileClaimRecord) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

// Sweep deletes expired replies and the lock files of keys with no reply
// (start-up housekeeping), each under its lock so no live claim is lost.
func (s *FileClaims) Sweep(context.Context) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	now := s.now().UnixMilli()
	seen := map[string]bool{}
	for _, de := range entries {
		name, ok := strings.CutSuffix(de.Name(), ".lock")
		if !ok {
			name, ok = strings.CutSuffix(de.Name(), ".json")
		}
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		path := filepath.Join(s.dir, name+".json")
		f, ok, err := s.lock(path)
		if err != nil || !ok {
			continue
		}
		var e FileClaimRecord
		data, rerr := os.ReadFile(path)
		switch {
		case errors.Is(rerr, fs.ErrNotExist):
			_ = os.Remove(ClaimLockPath(path))
		case rerr == nil && json.Unmarshal(data, &e) == nil && e.State == "done" && now >= e.ExpiresMS:
			_ = os.Remove(path)
			_ = os.Remove(ClaimLockPath(path))
		}
		f.Close()
	}
}
