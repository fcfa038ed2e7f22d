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
type idemStore struct {
	dir   string
	now   func() time.Time
	stale time.Duration // an in-flight marker older than this is a crashed run

	mu       sync.Mutex
	inflight map[string]bool // files this process is running right now
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

func newIdemStore(stateDir string, stale time.Duration, now func() time.Time) *idemStore {
	return &idemStore{dir: filepath.Join(stateDir, "idempotency"), now: now, stale: stale, inflight: map[string]bool{}}
}

// file names a (route, key) pair; the key itself is never stored.
func (s *idemStore) file(route, key string) string {
	sum := sha256.Sum256([]byte(route + "\n" + key))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:])+".json")
}

// claim outcomes.
const (
	claimRun      = iota // run it; the caller must finish or abandon
	claimReplay          // a recorded reply exists
	claimInFlight        // the same key is running now: 409
)

// begin claims (route, key). takenOver reports a stale marker of a
// crashed run that was replaced.
func (s *idemStore) begin(route, key string) (result int, e *idemEntry, takenOver bool, err error) {
	path := s.file(route, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[path] {
		return claimInFlight, nil, false, nil
	}
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
			if now.Sub(time.UnixMilli(old.CreatedMS)) < s.stale {
				return claimInFlight, nil, false, nil
			}
			takenOver = true
		}
	}
	marker := idemEntry{State: "in_flight", Route: route, CreatedMS: now.UnixMilli()}
	if err := s.write(path, &marker); err != nil {
		return 0, nil, false, err
	}
	s.inflight[path] = true
	return claimRun, nil, takenOver, nil
}

// finish records a reply for ttl.
func (s *idemStore) finish(route, key string, ttl time.Duration, status int, contentType string, body []byte) error {
	path := s.file(route, key)
	now := s.now()
	e := idemEntry{State: "done", Route: route, CreatedMS: now.UnixMilli(), ExpiresMS: now.Add(ttl).UnixMilli(),
		Status: status, ContentType: contentType, Body: body}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, path)
	return s.write(path, &e)
}

// abandon forgets a claim, so the key stays retryable (failed runs).
func (s *idemStore) abandon(route, key string) error {
	path := s.file(route, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, path)
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

// sweep deletes expired replies (start-up housekeeping).
func (s *idemStore) sweep() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	now := s.now().UnixMilli()
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".json") {
			continue
		}
		path := filepath.Join(s.dir, de.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var e idemEntry
		if json.Unmarshal(data, &e) == nil && e.State == "done" && now >= e.ExpiresMS {
			_ = os.Remove(path)
		}
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
