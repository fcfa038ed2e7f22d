package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestBadCheckpointsRefusedNamingTheFile: a checkpoint file that is not a
// whole, valid checkpoint of this workflow is refused by --resume and
// reported by --list-checkpoints and --resume-incomplete, always naming
// the file, with the usage exit code (2), never the failed-run one (5);
// listing never shows a run with an empty id.
func TestBadCheckpointsRefusedNamingTheFile(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "p", Type: "cli_action", Event: "pause"}, workflow.Node{ID: "after", Type: "cli_echo"})
	dir := t.TempDir()
	r := run(t, wf, nil, "", "--quiet", "--state-dir", dir)
	var paused map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &paused); err != nil || r.code != ExitPaused {
		t.Fatalf("pause: %d %s %s", r.code, r.stdout, r.stderr)
	}
	goodID := paused["run_id"].(string)
	good, err := os.ReadFile(filepath.Join(dir, "runs", goodID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(good, &fields); err != nil {
		t.Fatal(err)
	}
	variant := func(id string, change func(m map[string]any)) string {
		m := map[string]any{}
		for k, v := range fields {
			m[k] = v
		}
		m["run_id"] = id
		change(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct{ id, text, want string }{
		{"empty-object", `{}`, "field run_id is missing or null"},
		{"null", `null`, "field run_id is missing or null"},
		{"missing-field", variant("missing-field", func(m map[string]any) { delete(m, "outputs") }), "field outputs is missing or null"},
		{"unknown-field", variant("unknown-field", func(m map[string]any) { m["surprise"] = 1 }), `unknown field "surprise"`},
		{"bad-run-id", variant("bad-run-id", func(m map[string]any) { m["run_id"] = "../etc" }), `run_id "../etc" is not a valid run id`},
		{"unknown-start", variant("unknown-start", func(m map[string]any) { m["start_node"] = "nowhere" }), `unknown start node "nowhere"`},
		{"unknown-next", variant("unknown-next", func(m map[string]any) { m["next_node"] = "ghost" }), `unknown node "ghost"`},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			path := filepath.Join(dir, "runs", c.id+".json")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			r := run(t, wf, nil, "", "--quiet", "--state-dir", dir, "--resume", c.id)
			if r.code != ExitUsage || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Fatalf("--resume: exit %d, stderr %q; want %d naming %s with %q", r.code, r.stderr, ExitUsage, path, c.want)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("refused checkpoint was removed: %v", err)
			}
		})
	}

	// Listing: the valid runs are listed, each bad file is an error line
	// naming it, and the exit code says something was wrong.
	for _, c := range cases {
		if err := os.WriteFile(filepath.Join(dir, "runs", c.id+".json"), []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r = run(t, wf, nil, "", "--quiet", "--state-dir", dir, "--list-checkpoints")
	var list []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != ExitUsage {
		t.Fatalf("list: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	ids := map[string]bool{}
	for _, e := range list {
		ids[e["run_id"].(string)] = true
	}
	// Two decode fine and are listed (CheckResume is this workflow's
	// verdict: not resumable); the others are refused as files.
	if len(list) != 3 || !ids[goodID] || !ids["unknown-start"] || !ids["unknown-next"] || ids[""] {
		t.Fatalf("listed %v", ids)
	}
	for _, e := range list {
		if e["run_id"] != goodID && e["resumable"] != false {
			t.Fatalf("%v listed as resumable", e["run_id"])
		}
	}
	for _, c := range cases[:5] {
		if !strings.Contains(r.stderr, "--list-checkpoints: checkpoint "+filepath.Join(dir, "runs", c.id+".json")+" is not valid: "+c.want+"\n") {
			t.Fatalf("stderr does not report %s:\n%s", c.id, r.stderr)
		}
	}

	// --resume-incomplete resumes nothing in a directory with bad files.
	r = run(t, wf, nil, "", "--quiet", "--state-dir", dir, "--resume-incomplete")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "empty-object.json") || !strings.Contains(r.stderr, "nothing resumed") {
		t.Fatalf("--resume-incomplete: exit %d\n%s", r.code, r.stderr)
	}

	// The valid checkpoint still resumes.
	r = run(t, wf, nil, "", "--quiet", "--state-dir", dir, "--resume", goodID)
	if r.code != ExitOK {
		t.Fatalf("good resume: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestShortSecretWarning: a secret shorter than 8 characters is reported
// on stderr and in the audit log, once, by name and never by value, even
// when it is resolved by several nodes.
func TestShortSecretWarning(t *testing.T) {
	const value = "Zq7#x" // five characters, and in no other output
	wf := simpleWF("short", workflow.Node{ID: "one", Type: "cli_echo", Key: "KILN_TEST_SHORT_SECRET"},
		workflow.Node{ID: "two", Type: "cli_echo", Key: "KILN_TEST_SHORT_SECRET"})
	r := run(t, wf, map[string]string{"KILN_TEST_SHORT_SECRET": value}, "", "--log-format", "json")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	const line = "agent: warning: secret KILN_TEST_SHORT_SECRET is shorter than 8 characters; redaction of short values can hide unrelated output\n"
	if n := strings.Count(r.stderr, line); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, `"msg":"secret.short","secret":"KILN_TEST_SHORT_SECRET"`); n != 1 {
		t.Fatalf("%d audit events, want 1:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, value) {
		t.Fatalf("value leaked:\n%s\n%s", r.stdout, r.stderr)
	}
	// A second run in this process: the secret was already reported.
	r = run(t, wf, map[string]string{"KILN_TEST_SHORT_SECRET": value}, "", "--log-format", "json")
	if strings.Contains(r.stderr, "shorter than 8") {
		t.Fatalf("warned twice:\n%s", r.stderr)
	}
	// A long secret is not reported.
	r = run(t, wf, map[string]string{"KILN_TEST_SHORT_SECRET": "long-enough-secret"}, "", "--log-format", "json")
	if strings.Contains(r.stderr, "shorter than 8") {
		t.Fatalf("long secret reported:\n%s", r.stderr)
	}
}
