package fswatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire/firetest"
)

const wfTOML = `
name = "watch"
[[start_nodes]]
name = "on_file"
source = "event"
entry_node = "rec"
[[triggers]]
type = "fs_watch"
path = %q
recursive = %v
events = [%s]
debounce_ms = %d
start_node = "on_file"
[[nodes]]
id = "rec"
type = "firetest_record"
`

// watch starts a listener on dir and returns the audit log and a stop func.
func watch(t *testing.T, dir string, recursive bool, events string, debounceMS int) (*firetest.Buffer, func()) {
	t.Helper()
	firetest.Drain()
	h, buf := firetest.Host(t, fmt.Sprintf(wfTOML, dir, recursive, events, debounceMS))
	if err := setup(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	ls, err := listeners(h)
	if err != nil || len(ls) != 1 {
		t.Fatalf("listeners %v %v", ls, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ls[0].Serve(ctx) }()
	buf.WaitFor(t, "fs_watch.started")
	return buf, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func expect(t *testing.T, path, event string) map[string]any {
	t.Helper()
	trig := firetest.Next(t, 5*time.Second)
	if trig["kind"] != "event" || trig["type"] != "fs_watch" || trig["path"] != path || trig["event"] != event {
		t.Fatalf("trigger %v, want %s on %s", trig, event, path)
	}
	if _, ok := trig["fired_at_unix_ms"]; !ok {
		t.Fatalf("no fired_at_unix_ms in %v", trig)
	}
	return trig
}

func TestCreateModifyRemove(t *testing.T) {
	dir := t.TempDir()
	buf, stop := watch(t, dir, false, "", 50)
	defer stop()
	f := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, f, "create")
	buf.WaitFor(t, "fs_watch.completed")
	if err := os.WriteFile(f, []byte("22"), 0o644); err != nil {
		t.Fatal(err)
	}
	if trig := expect(t, f, "modify"); fmt.Sprint(trig["tick"]) != "2" {
		t.Fatalf("tick %v", trig["tick"])
	}
	time.Sleep(20 * time.Millisecond)
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	expect(t, f, "remove")
	if !strings.Contains(buf.String(), "msg=fs_watch.fire") {
		t.Fatalf("no fire audit:\n%s", buf)
	}
}

func TestDebounceCoalescesBurst(t *testing.T) {
	dir := t.TempDir()
	_, stop := watch(t, dir, false, "", 200)
	defer stop()
	f := filepath.Join(dir, "burst.log")
	for i := range 10 {
		if err := os.WriteFile(f, []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	expect(t, f, "create") // created during the burst
	firetest.None(t, 400*time.Millisecond)
}

func TestEventFilter(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stop := watch(t, dir, false, `"remove"`, 30)
	defer stop()
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	firetest.None(t, 200*time.Millisecond)
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	expect(t, f, "remove")
}

func TestRenameReported(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "old.txt")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stop := watch(t, dir, false, `"rename"`, 30)
	defer stop()
	if err := os.Rename(f, filepath.Join(dir, "new.txt")); err != nil {
		t.Fatal(err)
	}
	expect(t, f, "rename")
}

func TestRecursiveWatchesNewSubdirectories(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	buf, stop := watch(t, dir, true, `"create", "modify"`, 30)
	defer stop()

	// A file in a directory that existed at start-up.
	f1 := filepath.Join(existing, "one.txt")
	if err := os.WriteFile(f1, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, f1, "create")
	buf.WaitFor(t, "fs_watch.completed")

	// A directory created while watching, then a file in it.
	sub := filepath.Join(dir, "new", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// Both directory creates settle together; the second may be skipped
	// while the first run is in flight (one run at a time), so only the
	// first is certain.
	if trig := firetest.Next(t, 5*time.Second); trig["event"] != "create" {
		t.Fatalf("trigger %v", trig)
	}
	time.Sleep(100 * time.Millisecond)
	waitIdle(t, buf)
	firetest.Drain()
	f2 := filepath.Join(sub, "two.txt")
	if err := os.WriteFile(f2, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, f2, "create")
}

func TestNonRecursiveIgnoresNested(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	_, stop := watch(t, dir, false, "", 30)
	defer stop()
	if err := os.WriteFile(filepath.Join(sub, "nested.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	firetest.None(t, 200*time.Millisecond)
}

func TestStartUpErrors(t *testing.T) {
	dir := t.TempDir()
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, filepath.Join(dir, "missing"), false, "", 10))
	if _, err := listeners(h); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing path: %v", err)
	}
	h, _ = firetest.Host(t, fmt.Sprintf(wfTOML, dir, false, `"delete"`, 10))
	if err := setup(context.Background(), h); err == nil || !strings.Contains(err.Error(), `event "delete" must be one of`) {
		t.Fatalf("bad event: %v", err)
	}
	h, _ = firetest.Host(t, fmt.Sprintf(wfTOML, dir, false, "", -1))
	if err := setup(context.Background(), h); err == nil || !strings.Contains(err.Error(), "debounce_ms") {
		t.Fatalf("bad debounce: %v", err)
	}
}

func TestRelativePathResolvesAgainstWorkflowDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "inbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, _ := firetest.Host(t, fmt.Sprintf(wfTOML, "inbox", false, "", 10))
	h.Program.Workflow.Source = filepath.Join(dir, "workflow.toml")
	l, err := NewListener(h, 0, h.Program.Workflow.Triggers[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.root != filepath.Join(dir, "inbox") {
		t.Fatalf("root %s", l.root)
	}
}

// waitIdle waits until no run is in flight, so the next change is not
// skipped as overlapping.
func waitIdle(t *testing.T, buf *firetest.Buffer) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "msg=fs_watch.fire") != strings.Count(buf.String(), "msg=fs_watch.completed") {
		if time.Now().After(deadline) {
			t.Fatalf("run never completed:\n%s", buf)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
