package runtime

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// testClock is a settable clock for rotation.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// readLines returns the JSON audit lines of path by their "msg".
func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: broken line %q: %v", path, sc.Text(), err)
		}
		msgs = append(msgs, ev["msg"].(string))
	}
	return msgs
}

// logFiles lists the names in dir.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestRotationPeriods: each line goes to the file of the period the clock
// is in when it is written, named as tracing-appender names it, in UTC.
func TestRotationPeriods(t *testing.T) {
	// 23:59:30 on 31 Dec in UTC, given in another zone: every period ends
	// within the next minute.
	start := time.Date(2024, 12, 31, 23, 59, 30, 0, time.UTC).In(time.FixedZone("X", 5*3600))
	steps := []time.Duration{0, 29 * time.Second, 30 * time.Second, 91 * time.Second, 25 * time.Hour}
	cases := []struct {
		rotation string
		want     map[string][]string // file -> the steps' lines in it
	}{
		{"daily", map[string][]string{
			"audit.log.2024-12-31": {"line0", "line1"},
			"audit.log.2025-01-01": {"line2", "line3"},
			"audit.log.2025-01-02": {"line4"},
		}},
		{"hourly", map[string][]string{
			"audit.log.2024-12-31-23": {"line0", "line1"},
			"audit.log.2025-01-01-00": {"line2", "line3"},
			"audit.log.2025-01-02-00": {"line4"},
		}},
		{"minutely", map[string][]string{
			"audit.log.2024-12-31-23-59": {"line0", "line1"},
			"audit.log.2025-01-01-00-00": {"line2"},
			"audit.log.2025-01-01-00-01": {"line3"},
			"audit.log.2025-01-02-00-59": {"line4"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.rotation, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "nested", "logs") // created by the logger
			clock := &testClock{t: start}
			l, closer, err := NewAuditLogger(AuditOptions{Format: "json", Target: "file:" + filepath.Join(dir, "audit.log"),
				Rotation: tc.rotation, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range steps {
				clock.Set(start.Add(d))
				l.Info(fmt.Sprintf("line%d", i))
			}
			if err := closer.Close(); err != nil {
				t.Fatal(err)
			}
			var wantNames []string
			for name, lines := range tc.want {
				wantNames = append(wantNames, name)
				if got := readLines(t, filepath.Join(dir, name)); strings.Join(got, ",") != strings.Join(lines, ",") {
					t.Errorf("%s holds %v, want %v", name, got, lines)
				}
				fi, err := os.Stat(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
				}
			}
			sort.Strings(wantNames)
			// PATH itself is never written when rotating.
			if got := logFiles(t, dir); strings.Join(got, " ") != strings.Join(wantNames, " ") {
				t.Errorf("files %v, want %v", got, wantNames)
			}
		})
	}
}

// TestRotationNever: never (or no rotation) writes PATH itself, appending.
func TestRotationNever(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	for _, rotation := range []string{"", "never"} {
		l, closer, err := NewAuditLogger(AuditOptions{Format: "json", Target: "file:" + path, Rotation: rotation})
		if err != nil {
			t.Fatal(err)
		}
		l.Info("rotation=" + rotation)
		closer.Close()
	}
	if got := readLines(t, path); strings.Join(got, ",") != "rotation=,rotation=never" {
		t.Fatalf("lines %v", got)
	}
	if got := logFiles(t, dir); len(got) != 1 {
		t.Fatalf("files %v", got)
	}
	if _, _, err := NewAuditLogger(AuditOptions{Target: "file:" + path, Rotation: "weekly"}); err == nil ||
		!strings.Contains(err.Error(), `log rotation "weekly"`) {
		t.Fatalf("unknown rotation: %v", err)
	}
}

// TestRotationConcurrent: many goroutines writing to one rotating file
// (serve mode logs from many, through handlers that may not share a lock)
// while the clock crosses minutes: every line is written whole, once, to
// some period's file.
func TestRotationConcurrent(t *testing.T) {
	dir := t.TempDir()
	clock := &testClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	period, layout, _ := rotationPeriod("minutely")
	w, err := openRotatingFile(filepath.Join(dir, "audit.log"), period, layout, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 200
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() { // a minute passes every few lines
		for {
			select {
			case <-done:
				return
			default:
				clock.Set(clock.Now().Add(time.Minute))
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	pad := strings.Repeat("x", 300) // long lines split more readily
	for n := 0; n < writers; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := fmt.Fprintf(w, `{"msg":"w%d-%d","pad":%q}`+"\n", n, i, pad); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	files := logFiles(t, dir)
	for _, name := range files {
		if !strings.HasPrefix(name, "audit.log.2025-03-") {
			t.Errorf("unexpected file %s", name)
		}
		for _, msg := range readLines(t, filepath.Join(dir, name)) { // fails on a split line
			seen[msg]++
		}
	}
	if len(files) < 2 {
		t.Errorf("the clock crossed minutes but only %v were written", files)
	}
	for n := 0; n < writers; n++ {
		for i := 0; i < each; i++ {
			if c := seen[fmt.Sprintf("w%d-%d", n, i)]; c != 1 {
				t.Fatalf("line w%d-%d written %d times", n, i, c)
			}
		}
	}
}

// TestRotationKeepsLinesWhenNewFileFails: a next period's file that cannot
// be opened does not lose lines: they go to the open file until it can.
func TestRotationKeepsLinesWhenNewFileFails(t *testing.T) {
	dir := t.TempDir()
	clock := &testClock{t: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)}
	l, closer, err := NewAuditLogger(AuditOptions{Format: "json", Target: "file:" + filepath.Join(dir, "audit.log"),
		Rotation: "hourly", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	blocked := filepath.Join(dir, "audit.log.2025-01-01-11")
	if err := os.Mkdir(blocked, 0o755); err != nil { // a directory cannot be opened for writing
		t.Fatal(err)
	}
	l.Info("a")
	clock.Set(clock.Now().Add(time.Hour))
	l.Info("b")
	os.Remove(blocked)
	l.Info("c")
	if got := readLines(t, filepath.Join(dir, "audit.log.2025-01-01-10")); strings.Join(got, ",") != "a,b" {
		t.Errorf("old file holds %v", got)
	}
	if got := readLines(t, blocked); strings.Join(got, ",") != "c" {
		t.Errorf("new file holds %v", got)
	}
}

// TestAuditTargetTee: [logging.audit] target gets every event the
// [logging] target gets, redacted the same way; naming the same
// destination twice writes it once.
func TestAuditTargetTee(t *testing.T) {
	const secret = "tee-sink-secret-42"
	RedactValue(secret)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "audit", "b.log")
	l, closer, err := NewAuditLogger(AuditOptions{Format: "json", Target: "file:" + a, AuditTarget: "file:" + b,
		RedactFields: []string{"password"}})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("workflow.started", "token", "Bearer "+secret, "password", "pw")
	l.Warn("policy.denied", "reason", "denied "+secret)
	closer.Close()
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatalf("sinks differ:\n%s\n--\n%s", da, db)
	}
	if bytes.Contains(da, []byte(secret)) || bytes.Contains(da, []byte(`"pw"`)) || bytes.Count(da, []byte(RedactedMarker)) != 3 {
		t.Fatalf("not redacted:\n%s", da)
	}

	// The same file, spelled differently: one copy of each line.
	l, closer, err = NewAuditLogger(AuditOptions{Format: "json", Target: "file:" + a,
		AuditTarget: "file:" + filepath.Join(dir, "audit", "..", "a.log")})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("once")
	closer.Close()
	if got := readLines(t, a); strings.Join(got, ",") != "workflow.started,policy.denied,once" {
		t.Fatalf("same path twice: %v", got)
	}

	// A stream and a file; the same stream twice.
	var out, errb bytes.Buffer
	l, closer, err = NewAuditLogger(AuditOptions{Target: "stdout", AuditTarget: "file:" + b, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("both")
	closer.Close()
	lines, _ := os.ReadFile(b)
	if !strings.Contains(out.String(), "msg=both") || !strings.HasSuffix(string(lines), out.String()) || errb.Len() != 0 {
		t.Fatalf("stdout %q, file %q, stderr %q", out.String(), lines, errb.String())
	}
	out.Reset()
	l, _, err = NewAuditLogger(AuditOptions{AuditTarget: "stderr", Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("stream")
	if strings.Count(errb.String(), "msg=stream") != 1 || out.Len() != 0 {
		t.Fatalf("same stream twice: stderr %q stdout %q", errb.String(), out.String())
	}

	// Rotation applies to the audit file too; a bad audit target is refused.
	clock := &testClock{t: time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)}
	l, closer, err = NewAuditLogger(AuditOptions{Format: "json", Target: "stderr", Stderr: &errb,
		AuditTarget: "file:" + filepath.Join(dir, "rot", "audit.log"), Rotation: "daily", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("rotated")
	closer.Close()
	if got := readLines(t, filepath.Join(dir, "rot", "audit.log.2025-06-01")); strings.Join(got, ",") != "rotated" {
		t.Fatalf("rotated audit file: %v", got)
	}
	for _, bad := range []string{"syslog", "file:"} {
		if _, _, err := NewAuditLogger(AuditOptions{AuditTarget: bad, Stderr: &errb}); err == nil {
			t.Errorf("audit target %q accepted", bad)
		}
	}
}
