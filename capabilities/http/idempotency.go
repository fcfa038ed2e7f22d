package http

import (
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

	"github.com/kilnworks/kiln/runtime"
)

// idemStore remembers the replies of keyed routes under
// <state-dir>/idempotency/, one file per (route, key), written
// atomically. Webhook providers deliver at least once; a redelivery
// within the TTL gets the recorded reply instead of a second run.
//
// A claim is an exclusive flock on the pair's .lock file, held for the
// whole run: every process sharing the state directory sees it (two
// servers cannot both run one key), and it dies with its process, so the
// key of a crashed run is free again at once.
type idemStore struct {
	dir string
	now func() time.Time

	mu   sync.Mutex
	held map[string]*os.File // path -> lock file of each claim this process holds
}

// idemEntry is one file: an in-flight marker or a recorded reply.
type idemEntry struct {
	State       string `json:"state"` // in_flight | done
	Route       string `json:"route"`
	CreatedMS   int64  `json:"created_unix_ms"`
	ExpiresMS   int64  `json:"expires_unix_ms,omitempty"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

func newIdemStore(stateDir string, now func() time.Time) *idemStore {
	return &idemStore{dir: filepath.Join(stateDir, "idempotency"), now: now, held: map[string]*os.File{}}
}

// file names a (route, key) pair; the key itself is never stored.
func (s *idemStore) file(route, key string) string {
	sum := sha256.Sum256([]byte(route + "\n" + key))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".json")
}

func lockFile(path string) string { return strings.TrimSuffix(path, ".json") + ".lock" }

// lock takes the claim lock of path without waiting; ok is false while
// another holder (this process or another) has it.
func (s *idemStore) lock(path string) (f *os.File, ok bool, err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("idempotency store: %w", err)
	}
	f, ok, err = runtime.TryLockFile(lockFile(path))
	if err != nil {
		return nil, false, fmt.Errorf("idempotency store: %w", err)
	}
	return f, ok, nil
}

// claim outcomes.
const (
	claimRun      = iota // run it; the caller must finish or abandon
	claimReplay          // a recorded reply exists
	claimInFlight        // the same key is running now: 409
)

// begin claims (route, key). takenOver reports the in-flight marker of a
// run whose process is gone (it crashed holding the claim).
func (s *idemStore) begin(route, key string) (result int, e *idemEntry, takenOver bool, err error) {
	path := s.file(route, key)
	f, ok, err := s.lock(path)
	if err != nil || !ok {
		return claimInFlight, nil, false, err
	}
	release := true
	defer func() {
		if release {
			f.Close() // closing the descriptor releases the lock
		}
	}()
	now := s.now()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, nil, false, fmt.Errorf("idempotency store: %w", err)
	default:
		var old idemEntry
		if err := json.Unmarshal(data, &old); err != nil {
			return 0, nil, false, fmt.Errorf("idempotency store: %s is corrupt: %v", filepath.Base(path), err)
		}
		switch old.State {
		case "done":
			if now.UnixMilli() < old.ExpiresMS {
				return claimReplay, &old, false, nil
			}
		case "in_flight":
			takenOver = true // we hold the lock: its run is gone
		}
	}
	marker := idemEntry{State: "in_flight", Route: route, CreatedMS: now.UnixMilli()}
	if err := s.write(path, &marker); err != nil {
		return 0, nil, false, err
	}
	s.mu.Lock()
	s.held[path] = f
	s.mu.Unlock()
	release = false
	return claimRun, nil, takenOver, nil
}

// unlock releases the claim of path this process holds.
func (s *idemStore) unlock(path string) {
	s.mu.Lock()
	f := s.held[path]
	delete(s.held, path)
	s.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// finish records a reply for ttl and releases the claim.
func (s *idemStore) finish(route, key string, ttl time.Duration, status int, contentType string, body []byte) error {
	path := s.file(route, key)
	defer s.unlock(path)
	now := s.now()
	e := idemEntry{State: "done", Route: route, CreatedMS: now.UnixMilli(), ExpiresMS: now.Add(ttl).UnixMilli(),
		Status: status, ContentType: contentType, Body: body}
	return s.write(path, &e)
}

// abandon forgets a claim, so the key stays retryable (failed runs).
func (s *idemStore) abandon(route, key string) error {
	path := s.file(route, key)
	defer s.unlock(path)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

func (s *idemStore) write(path string, e *idemEntry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := runtime.WriteFileAtomic(path, data, 0o600); err != nil {
		return fmt.Errorf("idempotency store: %w", err)
	}
	return nil
}

// sweep deletes expired replies and the lock files of keys with no reply
// (start-up housekeeping), each under its lock so no live claim is lost.
func (s *idemStore) sweep() {
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
		var e idemEntry
		data, rerr := os.ReadFile(path)
		switch {
		case errors.Is(rerr, fs.ErrNotExist):
			_ = os.Remove(lockFile(path))
		case rerr == nil && json.Unmarshal(data, &e) == nil && e.State == "done" && now >= e.ExpiresMS:
			_ = os.Remove(path)
			_ = os.Remove(lockFile(path))
		}
		f.Close()
	}
}

// idempotencyKey extracts a route's key from the request: the hex
// SHA-256 of the raw body, or a scalar at a dotted path of the payload
// ("trigger." prefix accepted). Scalars are type-tagged so 1 and "1"
// are different keys.
func idempotencyKey(spec string, trigger map[string]any, body []byte) (string, error) {
	if spec == "body_sha256" {
		sum := sha256.Sum256(body)
		return "body_sha256:" + hex.EncodeToString(sum[:]), nil
	}
	path := strings.TrimPrefix(spec, "trigger.")
	v, ok := runtime.Lookup(trigger, path)
	if !ok {
		return "", fmt.Errorf("idempotency key %s is missing from the request", spec)
	}
	switch x := v.(type) {
	case string:
		return "s:" + x, nil
	case json.Number:
		return "n:" + x.String(), nil
	case bool:
		return fmt.Sprintf("b:%t", x), nil
	}
	return "", fmt.Errorf("idempotency key %s must be a string, number or boolean, not %s", spec, runtime.SwitchLabel(v))
}
