package http

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func idemFiles(t *testing.T, ts *testServer) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(ts.host.Engine.StateDir, "idempotency", "*.json"))
	return m
}

func TestIdempotentReplay(t *testing.T) {
	ts := start(t, wf("count", `idempotency_key = "trigger.order.id"
idempotency_ttl_secs = 3600`), setup{})
	before := runCount.Load()
	first := ts.do(t, "POST", "/hook", `{"order":{"id":"A-1"},"n":1}`).expect(t, 200)
	if first.header.Get("X-Idempotent-Replay") != "" {
		t.Fatal("first delivery marked as replay")
	}
	second := ts.do(t, "POST", "/hook", `{"order":{"id":"A-1"},"n":2}`).expect(t, 200)
	if second.header.Get("X-Idempotent-Replay") != "true" || second.body != first.body {
		t.Fatalf("replay: header %q body %s vs %s", second.header.Get("X-Idempotent-Replay"), second.body, first.body)
	}
	if got := runCount.Load() - before; got != 1 {
		t.Fatalf("workflow ran %d times, want 1", got)
	}
	// Type matters: the number 1 and the string "1" are different keys.
	ts.do(t, "POST", "/hook", `{"order":{"id":1}}`).expect(t, 200)
	ts.do(t, "POST", "/hook", `{"order":{"id":"1"}}`).expect(t, 200)
	if got := runCount.Load() - before; got != 3 {
		t.Fatalf("workflow ran %d times, want 3", got)
	}
	// The store holds the reply, never the key.
	files := idemFiles(t, ts)
	if len(files) != 3 {
		t.Fatalf("%d idempotency files, want 3", len(files))
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), "A-1") {
			t.Fatalf("key stored in clear in %s", f)
		}
		if info, _ := os.Stat(f); info.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v", f, info.Mode().Perm())
		}
	}
	// Bad keys: missing, non-scalar, null. Nothing runs.
	for _, body := range []string{`{}`, `{"order":{"id":{"x":1}}}`, `{"order":{"id":[1]}}`, `{"order":{"id":null}}`, `[1]`} {
		r := ts.do(t, "POST", "/hook", body).expect(t, 400)
		if !strings.Contains(r.body, "idempotency key trigger.order.id") {
			t.Fatalf("%s: %s", body, r.body)
		}
	}
	if got := runCount.Load() - before; got != 3 {
		t.Fatalf("bad keys ran the workflow")
	}
}

func TestIdempotencyRespondReplayAndBodyKey(t *testing.T) {
	ts := start(t, wf("respond", `idempotency_key = "body_sha256"`), setup{})
	r := ts.do(t, "POST", "/hook", `{"name":"bo"}`).expect(t, 201)
	again := ts.do(t, "POST", "/hook", `{"name":"bo"}`).expect(t, 201)
	if again.body != "hello bo" || again.header.Get("Content-Type") != "text/plain" || again.header.Get("X-Idempotent-Replay") != "true" {
		t.Fatalf("respond reply not replayed verbatim: %q %v", again.body, again.header)
	}
	_ = r
	// A different body is a different key (whitespace included: raw bytes).
	other := ts.do(t, "POST", "/hook", `{"name": "bo"}`).expect(t, 201)
	if other.header.Get("X-Idempotent-Replay") != "" {
		t.Fatal("different raw body replayed")
	}
}

func TestIdempotencyFailuresStayRetryable(t *testing.T) {
	ts := start(t, wf("count_fail", `idempotency_key = "trigger.id"`), setup{})
	before := runCount.Load()
	ts.do(t, "POST", "/hook", `{"id":"x"}`).expect(t, 422)
	r := ts.do(t, "POST", "/hook", `{"id":"x"}`).expect(t, 422)
	if r.header.Get("X-Idempotent-Replay") != "" || runCount.Load()-before != 2 {
		t.Fatalf("failed delivery was recorded (runs %d)", runCount.Load()-before)
	}
	if files := idemFiles(t, ts); len(files) != 0 {
		t.Fatalf("failure left %v", files)
	}
}

func TestIdempotencyPausedRecorded(t *testing.T) {
	ts := start(t, wf("pause", `idempotency_key = "trigger.id"`), setup{})
	first := ts.do(t, "POST", "/hook", `{"id":"p"}`).expect(t, 202)
	again := ts.do(t, "POST", "/hook", `{"id":"p"}`).expect(t, 202)
	if again.header.Get("X-Idempotent-Replay") != "true" || again.json["run_id"] != first.json["run_id"] {
		t.Fatalf("pause not replayed: %s vs %s", again.body, first.body)
	}
}

func TestIdempotencyConcurrentDuplicate(t *testing.T) {
	g := resetGate()
	ts := start(t, wf("block", `idempotency_key = "trigger.id"`), setup{})
	before := runCount.Load()
	firstDone := make(chan resp, 1)
	go func() { firstDone <- ts.try("POST", "/hook", `{"id":"dup"}`) }()
	// Wait until the first delivery holds the key.
	waitFor(t, func() bool { return len(idemFiles(t, ts)) == 1 })
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ts.try("POST", "/hook", `{"id":"dup"}`)
			if r.code != 409 || !strings.Contains(r.body, "in flight") {
				t.Errorf("duplicate: %d %s", r.code, r.body)
			}
		}()
	}
	wg.Wait()
	// Another key is not blocked by it.
	otherDone := make(chan resp, 1)
	go func() { otherDone <- ts.try("POST", "/hook", `{"id":"other"}`) }()
	waitFor(t, func() bool { return len(idemFiles(t, ts)) == 2 })
	close(g)
	(<-firstDone).expect(t, 200)
	(<-otherDone).expect(t, 200)
	ts.do(t, "POST", "/hook", `{"id":"dup"}`).expect(t, 200)
	if got := runCount.Load() - before; got != 2 {
		t.Fatalf("ran %d times, want 2", got)
	}
	m := parseMetrics(t, ts.do(t, "GET", "/metrics", "").expect(t, 200).body)
	if c, r := m[`kiln_http_idempotency_conflicts_total{route="POST /hook",workflow="hooks"}`],
		m[`kiln_http_idempotency_replays_total{route="POST /hook",workflow="hooks"}`]; c != 5 || r != 1 {
		t.Fatalf("idempotency conflicts %v replays %v, want 5 and 1", c, r)
	}
}

// TestIdempotencyClaimsAcrossProcessesAndTTL: a claim is a lock held by
// the running process. Another live process's claim answers 409; the
// marker of a process that is gone is taken over at once; replies expire
// after their TTL.
func TestIdempotencyClaimsAcrossProcessesAndTTL(t *testing.T) {
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	h := newHost(t, wf("count", `idempotency_key = "trigger.id"
idempotency_ttl_secs = 60`), setup{cfg: Config{}})
	h.Engine.Now = now
	buf := &syncBuffer{}
	h.Engine.Audit = slog.New(slog.NewJSONHandler(buf, nil))
	s, err := New(h, Config{RunTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, false)

	// Another server process sharing the state directory is running
	// "busy": it holds the claim lock and wrote its marker.
	path := s.idem.file("POST /hook", "s:busy")
	writeMarker(t, path, now())
	holder := holdLock(t, lockFile(path))
	ts.do(t, "POST", "/hook", `{"id":"busy"}`).expect(t, 409)
	// When that process dies, its claim dies with it: no timer to wait out.
	holder.release()
	before := runCount.Load()
	ts.do(t, "POST", "/hook", `{"id":"busy"}`).expect(t, 200)
	if runCount.Load()-before != 1 || !strings.Contains(buf.String(), "http.idempotency_takeover") {
		t.Fatalf("the dead process's marker was not taken over:\n%s", buf.String())
	}

	// A marker whose process crashed long ago (no lock) is taken over too.
	crashed := s.idem.file("POST /hook", "s:crashed")
	writeMarker(t, crashed, now())
	ts.do(t, "POST", "/hook", `{"id":"crashed"}`).expect(t, 200)
	r := ts.do(t, "POST", "/hook", `{"id":"crashed"}`).expect(t, 200)
	if r.header.Get("X-Idempotent-Replay") != "true" {
		t.Fatal("no replay within TTL")
	}
	// After the TTL the key runs again.
	advance(61 * time.Second)
	before = runCount.Load()
	r = ts.do(t, "POST", "/hook", `{"id":"crashed"}`).expect(t, 200)
	if r.header.Get("X-Idempotent-Replay") != "" || runCount.Load()-before != 1 {
		t.Fatal("expired entry replayed")
	}
}

func writeMarker(t *testing.T, path string, at time.Time) {
	t.Helper()
	marker, _ := json.Marshal(idemEntry{State: "in_flight", Route: "POST /hook", CreatedMS: at.UnixMilli()})
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, marker, 0o600); err != nil {
		t.Fatal(err)
	}
}

// lockHolder is another process holding an flock, as a second kiln server
// running the same key would.
type lockHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// holdLock starts this test binary as a child that locks path and keeps
// the lock until release (or until the test ends).
func holdLock(t *testing.T, path string) *lockHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "KILN_TEST_HOLD_LOCK="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &lockHolder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.release)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q %v", line, err)
	}
	return h
}

func (h *lockHolder) release() {
	if h.stdin != nil {
		h.stdin.Close() // the child exits when its stdin closes
		_ = h.cmd.Wait()
		h.stdin = nil
	}
}

// TestHelperHoldLock is the child of holdLock, not a test of its own.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("KILN_TEST_HOLD_LOCK")
	if path == "" {
		t.Skip("helper process for holdLock")
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestIdempotencySweep: start-up housekeeping removes expired replies and
// orphaned lock files, keeps live replies, and never touches a key whose
// claim another process holds.
func TestIdempotencySweep(t *testing.T) {
	clock := time.Now()
	s := newIdemStore(t.TempDir(), func() time.Time { return clock })
	reply := func(key string, ttl time.Duration) string {
		if claim, _, _, err := s.begin("POST /hook", key); err != nil || claim != claimRun {
			t.Fatalf("claim %s: %d %v", key, claim, err)
		}
		if err := s.finish("POST /hook", key, ttl, 200, "application/json", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		return s.file("POST /hook", key)
	}
	expired, live := reply("old", time.Minute), reply("new", time.Hour)
	busy := s.file("POST /hook", "busy")
	writeMarker(t, busy, clock)
	holder := holdLock(t, lockFile(busy))
	orphan := lockFile(s.file("POST /hook", "abandoned"))
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Minute)
	s.sweep()
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for p, want := range map[string]bool{
		expired: false, lockFile(expired): false, orphan: false,
		live: true, busy: true, lockFile(busy): true,
	} {
		if exists(p) != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(p), !want, want)
		}
	}
	holder.release()
	if claim, _, takenOver, err := s.begin("POST /hook", "busy"); err != nil || claim != claimRun || !takenOver {
		t.Fatalf("after the holder exits: %d %v %v", claim, takenOver, err)
	}
}

// A generated program enables keyed routes only when its workflow
// declares one (as capabilities/all does for kiln run); these tests serve
// them, so they enable them.
func init() { EnableIdempotency() }

// TestIdempotencyRefusedWithoutSupport: a keyed route in a program that
// did not link idempotency support is refused at start, naming the route,
// never served without its replay guarantee.
func TestIdempotencyRefusedWithoutSupport(t *testing.T) {
	h := newHost(t, wf("respond", `idempotency_key = "body_sha256"`), setup{})
	if _, err := New(h, Config{}); err != nil {
		t.Fatalf("positive control: with idempotency support: %v", err)
	}
	enabled := idempotency
	idempotency = nil
	defer func() { idempotency = enabled }()
	_, err := New(h, Config{})
	if err == nil || !strings.Contains(err.Error(), "POST /hook") || !strings.Contains(err.Error(), "built without idempotency support") {
		t.Fatalf("err = %v, want a refusal naming the route", err)
	}
}
