package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for stores.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const runA = "0123456789abcdef0123456789abcdef"

// TestFileRunsRoundTrip: a record written is read back whole, replaced by
// a later write, and stored as a 0600 file under <state-dir>/async.
func TestFileRunsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := NewFileRuns(dir, clk.now)
	ctx := context.Background()
	rec := RunRecord{ID: runA, Route: "POST /hook", State: RunAccepted, Created: clk.now(), Updated: clk.now()}
	if err := s.PutRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Outcome = RunEnded, []byte(`{"http_status":200}`)
	if err := s.PutRun(ctx, rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.GetRun(ctx, runA)
	if err != nil || !ok || got.State != RunEnded || string(got.Outcome) != `{"http_status":200}` || got.Route != "POST /hook" {
		t.Fatalf("GetRun = %+v, %v, %v", got, ok, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "async", runA+".json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record file: %v %v", fi, err)
	}
	if _, ok, err := s.GetRun(ctx, strings.Repeat("f", RunIDLen)); ok || err != nil {
		t.Fatalf("unknown id: ok %v err %v", ok, err)
	}
}

// TestFileRunsRefusesBadIDs: an id that is not 32 lower-case hex digits
// never becomes a file name, so a caller's id cannot reach outside the
// store's directory.
func TestFileRunsRefusesBadIDs(t *testing.T) {
	dir := t.TempDir()
	s := NewFileRuns(filepath.Join(dir, "state"), time.Now)
	ctx := context.Background()
	// A record outside the store that a traversal would reach.
	outside := filepath.Join(dir, "state", "victim.json")
	if err := os.MkdirAll(filepath.Dir(outside), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside, []byte(`{"id":"x","state":"ended","expires":"2999-01-01T00:00:00Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../victim", "..", runA[:31], runA + "0", strings.ToUpper(runA), runA[:30] + "/.", runA[:31] + "g"} {
		if ValidRunID(id) {
			t.Errorf("ValidRunID(%q) = true", id)
		}
		if _, ok, err := s.GetRun(ctx, id); ok || err != nil {
			t.Errorf("GetRun(%q): ok %v err %v", id, ok, err)
		}
		if err := s.PutRun(ctx, RunRecord{ID: id}, time.Hour); err == nil {
			t.Errorf("PutRun(%q) accepted", id)
		}
	}
	if data, _ := os.ReadFile(outside); !strings.Contains(string(data), `"x"`) {
		t.Fatal("the file outside the store changed")
	}
}

// TestFileRunsExpireAndSweep: a record is gone for readers once its
// retention passed, and a sweep deletes its file (and leaves live ones).
func TestFileRunsExpireAndSweep(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	s := NewFileRuns(dir, clk.now)
	ctx := context.Background()
	short, long := runA, strings.Repeat("b", RunIDLen)
	if err := s.PutRun(ctx, RunRecord{ID: short, State: RunEnded}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(ctx, RunRecord{ID: long, State: RunEnded}, 0); err != nil { // the default: 24 h
		t.Fatal(err)
	}
	clk.add(time.Minute - time.Second)
	if _, ok, _ := s.GetRun(ctx, short); !ok {
		t.Fatal("record gone before its retention")
	}
	clk.add(time.Second)
	if _, ok, _ := s.GetRun(ctx, short); ok {
		t.Fatal("record readable after its retention")
	}
	s.SweepRuns(ctx)
	if _, err := os.Stat(filepath.Join(dir, "async", short+".json")); !os.IsNotExist(err) {
		t.Fatalf("expired record not swept: %v", err)
	}
	if _, ok, _ := s.GetRun(ctx, long); !ok {
		t.Fatal("sweep removed a live record")
	}
	clk.add(DefaultRunRetention)
	s.SweepRuns(ctx)
	if entries, _ := os.ReadDir(filepath.Join(dir, "async")); len(entries) != 0 {
		t.Fatalf("left after the default retention: %v", entries)
	}
}

// TestFileRunsBounded: a record over MaxRunRecordBytes is refused, and an
// oversized file placed in the store is not read.
func TestFileRunsBounded(t *testing.T) {
	dir := t.TempDir()
	s := NewFileRuns(dir, time.Now)
	ctx := context.Background()
	big := []byte(`"` + strings.Repeat("x", MaxRunRecordBytes) + `"`)
	if err := s.PutRun(ctx, RunRecord{ID: runA, State: RunEnded, Outcome: big}, time.Hour); err == nil {
		t.Fatal("oversized record accepted")
	}
	path := filepath.Join(dir, "async", runA+".json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append([]byte(`{"id":"`+runA+`","outcome":`), append(big, '}')...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.GetRun(ctx, runA); ok || err == nil {
		t.Fatalf("oversized file read: ok %v err %v", ok, err)
	}
}

// TestRunStoreFor: the installed backend wins, else the file store under
// the state directory, else none.
func TestRunStoreFor(t *testing.T) {
	if s := RunStoreFor(&Engine{}); s != nil {
		t.Fatalf("no state dir: %T", s)
	}
	if _, ok := RunStoreFor(&Engine{StateDir: t.TempDir()}).(*FileRuns); !ok {
		t.Fatal("state dir: not the file store")
	}
	svc := &Services{}
	mine := NewFileRuns(t.TempDir(), time.Now)
	SetRunStore(svc, mine)
	if s := RunStoreFor(&Engine{StateDir: t.TempDir(), Services: svc}); s != RunStore(mine) {
		t.Fatal("the installed store was not used")
	}
}
