package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// kiln inspect RUN.json prints the run as a timeline; --html writes the
// self-contained page; kiln replay --html writes both runs side by side.
func TestInspectRunTimeline(t *testing.T) {
	t.Setenv("USER", "alice")
	out := t.TempDir()
	wf := copyExample(t, "hello", "/tmp/kiln-hello/", out+"/")
	tp := record(t, wf, "--input", writeJSON(t, map[string]any{"output_path": filepath.Join(out, "hello.txt")}))

	code, stdout, stderr := runKiln(t, "inspect", tp)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"workflow hello", "NODE", "KIND", "START", "DURATION", "ATTEMPT", "BRANCH", "STATUS"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("timeline lacks %q:\n%s", want, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^greeting\s+template_render\s+\+\d+ ms\s+\d+ ms\s+1\s+-\s+continue$`).MatchString(stdout) {
		t.Fatalf("no line for greeting:\n%s", stdout)
	}

	page := filepath.Join(t.TempDir(), "run.html")
	if code, _, stderr := runKiln(t, "inspect", tp, "--html", page); code != cli.ExitOK {
		t.Fatalf("--html: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	if !strings.Contains(html, "Content-Security-Policy") || !strings.Contains(html, "default-src 'none'") ||
		regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).MatchString(html) || !strings.Contains(html, `"node":"greeting"`) {
		t.Fatalf("page is not self-contained or lacks the run:\n%.2000s", html)
	}

	// --workflow draws the graph with the run's path above the timeline.
	if code, _, stderr := runKiln(t, "inspect", tp, "--html", page, "--workflow", wf); code != cli.ExitOK {
		t.Fatalf("--workflow: exit %d: %s", code, stderr)
	}
	if data, _ := os.ReadFile(page); !strings.Contains(string(data), `<section id="graph"><svg`) {
		t.Fatalf("no graph in the page")
	}

	// A plain run record (no tape version) still shows as a timeline.
	rec := filepath.Join(t.TempDir(), "record.json")
	os.WriteFile(rec, []byte(`{"workflow":"w","status":"completed","trace":{"execution_id":"x","entries":[
		{"node_id":"a","kind":"noop","outcome":"continue","branch":"yes","output":null,"elapsed_ms":3}]}}`), 0o644)
	if code, stdout, _ := runKiln(t, "inspect", rec); code != cli.ExitOK || !regexp.MustCompile(`(?m)^a\s+noop\s+\+0 ms\s+3 ms\s+1\s+yes\s+continue$`).MatchString(stdout) {
		t.Fatalf("record: exit %d\n%s", code, stdout)
	}

	side := filepath.Join(t.TempDir(), "replay.html")
	changed := edit(t, wf, "Hello, {{value}}!", "Hi, {{value}}!")
	code, stdout, stderr = runKiln(t, "replay", tp, "--against", changed, "--html", side)
	if code != cli.ExitFailed || !strings.Contains(stdout, "first divergence: node greeting") {
		t.Fatalf("replay --html: exit %d\n%s%s", code, stdout, stderr)
	}
	data, _ = os.ReadFile(side)
	if !strings.Contains(string(data), `"label":"recorded"`) || !strings.Contains(string(data), `"label":"replayed"`) ||
		!strings.Contains(string(data), `"divergence":{"step":1,"node":"greeting"`) || !strings.Contains(string(data), `<section id="graph"><svg`) {
		t.Fatalf("side-by-side page:\n%.3000s", data)
	}
}
