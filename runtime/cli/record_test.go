package cli

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/tape"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func tapeNames(t *testing.T, dir string) []string {
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

// --record-dir writes one tape per run and keeps the directory within
// --record-keep tapes and --record-max-age-days, touching no other file.
func TestRecordDirBounded(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	dir := t.TempDir()
	other := filepath.Join(dir, "notes.json")
	os.WriteFile(other, []byte("{}"), 0o600)
	old := filepath.Join(dir, "tape-19990101T000000.000Z-000001-old.json")
	os.WriteFile(old, []byte("{}"), 0o600)
	aged := time.Now().Add(-10 * 24 * time.Hour)
	os.Chtimes(old, aged, aged)

	for range 3 {
		if r := run(t, wf, nil, "", "--quiet", "--record-dir", dir, "--record-keep", "2"); r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	names := tapeNames(t, dir)
	var tapes []string
	for _, n := range names {
		if strings.HasPrefix(n, "tape-") {
			tapes = append(tapes, n)
		}
	}
	if len(tapes) != 2 || !strings.Contains(strings.Join(names, " "), "notes.json") {
		t.Fatalf("directory holds %v", names)
	}
	tp, err := tape.Read(filepath.Join(dir, tapes[1]))
	if err != nil {
		t.Fatal(err)
	}
	if tp.Workflow != "w" || tp.Status != "completed" || len(tp.Attempts) != 1 || tp.Trigger["kind"] != "manual" {
		t.Fatalf("tape: %+v", tp)
	}

	r := run(t, wf, nil, "", "--quiet", "--record-dir", dir, "--record-keep", "0")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--record-keep") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// --record FILE writes the full tape of a one-shot run: trigger included.
func TestRecordWritesTape(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	dir := t.TempDir()
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"text": "hi"}`), 0o600)
	rec := filepath.Join(dir, "run.json")
	if r := run(t, wf, nil, "", "--quiet", "--input", in, "--record", rec); r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	tp, err := tape.Read(rec)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Trigger["text"] != "hi" || tp.StartNode != "main" || len(tp.Trace.Entries) != 1 || tp.ExecutionID == "" {
		t.Fatalf("tape: %+v", tp)
	}
}
