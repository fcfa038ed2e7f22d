package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// The end-to-end tests run the real kiln binary, built once per test
// process (on first use) into a temporary directory.
var kilnBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	if os.Getenv(maxRSSHelperEnv) != "" {
		os.Exit(runForMaxRSS(os.Args[1:])) // cmd_check_nesting_test.go
	}
	code := m.Run()
	if kilnBin.dir != "" {
		os.RemoveAll(kilnBin.dir)
	}
	os.Exit(code)
}

// builtKiln returns the path of the kiln binary built from this package.
func builtKiln(t *testing.T) string {
	t.Helper()
	kilnBin.once.Do(func() {
		dir, err := testtool.ProcessDir("kiln-e2e-")
		if err != nil {
			kilnBin.err = err
			return
		}
		kilnBin.dir = dir
		kilnBin.path = filepath.Join(dir, "kiln")
		cmd := exec.Command("go", "build", "-o", kilnBin.path, ".")
		kilnBin.out, kilnBin.err = cmd.CombinedOutput()
	})
	if kilnBin.err != nil {
		t.Fatalf("go build kiln: %v\n%s", kilnBin.err, kilnBin.out)
	}
	return kilnBin.path
}

type execResult struct {
	code           int
	stdout, stderr string
}

// kiln runs the binary with args, extra environment and stdin.
func kiln(t *testing.T, env []string, stdin string, args ...string) execResult {
	t.Helper()
	cmd := exec.Command(builtKiln(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return execResult{code, out.String(), errb.String()}
}

func writeWorkflow(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func decodeOutcome(t *testing.T, r execResult) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not outcome JSON (%v):\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return m
}

const runWF = `
name = "e2e"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "route"

[[start_nodes]]
name = "alt"
source = "manual"
entry_node = "alt_entry"

[[nodes]]
id = "route"
type = "switch"
expr = "trigger.action"

[[nodes]]
id = "greet"
type = "template_render"
template = "Hi {{trigger.name}} <{{trigger.kind}}> {{trigger.n}}"

[[nodes]]
id = "reject"
type = "fail"
reason = "rejected by rule"

[[nodes]]
id = "approve"
type = "pause_for_approval"
reason = "needs a human"

[[nodes]]
id = "after_approve"
type = "terminate"

[[nodes]]
id = "emit"
type = "write_file"
path_from = "trigger.path"
content_from = "trigger.name"

[[nodes]]
id = "alt_entry"
type = "template_render"
template = "alt"

[[nodes]]
id = "slow"
type = "read_file"
path_from = "trigger.path"

[nodes.retry]
max_attempts = 3
backoff_ms = 5000

[[edges]]
from = "route"
to = "greet"
when = "greet"

[[edges]]
from = "route"
to = "reject"
when = "reject"

[[edges]]
from = "route"
to = "approve"
when = "approve"

[[edges]]
from = "approve"
to = "after_approve"

[[edges]]
from = "route"
to = "emit"
when = "write"

[[edges]]
from = "route"
to = "slow"
when = "slow"
`

const runPolicy = `
[policy.fs]
read = ["ALLOWED/**"]
write = ["ALLOWED/**"]
`

func e2eWorkflow(t *testing.T) (dir, path string) {
	dir = t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	os.Mkdir(allowed, 0o755)
	return dir, writeWorkflow(t, dir, runWF+strings.ReplaceAll(runPolicy, "ALLOWED", allowed))
}

func TestRunCompleted(t *testing.T) {
	dir, wf := e2eWorkflow(t)
	input := filepath.Join(dir, "in.json")
	os.WriteFile(input, []byte(`{"action":"greet","name":"Ada","kind":"http","n":1.0}`), 0o644)
	record := filepath.Join(dir, "records", "run.json")
	r := kiln(t, nil, "", "run", wf, "--input", input, "--record", record)
	if r.code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	m := decodeOutcome(t, r)
	if m["status"] != "completed" || m["last_node"] != "greet" {
		t.Fatalf("outcome %s", r.stdout)
	}
	// kind cannot be spoofed; 1.0 stays 1.0; no HTML escaping; pretty-printed.
	if !strings.Contains(r.stdout, `"rendered": "Hi Ada <manual> 1.0"`) || !strings.HasPrefix(r.stdout, "{\n  ") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	// The audit log (stderr) warns about nothing: the workflow has a policy.
	if strings.Contains(r.stderr, "policy.allow_all") || !strings.Contains(r.stderr, "workflow.completed") {
		t.Fatalf("stderr:\n%s", r.stderr)
	}

	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Workflow    string           `json:"workflow"`
		StartNode   string           `json:"start_node"`
		ExecutionID string           `json:"execution_id"`
		Status      string           `json:"status"`
		LastNode    string           `json:"last_node"`
		Detail      map[string]any   `json:"detail"`
		WallMS      *int64           `json:"wall_ms"`
		Cost        map[string]int64 `json:"cost"`
		Trace       struct {
			ExecutionID string           `json:"execution_id"`
			Entries     []map[string]any `json:"entries"`
		} `json:"trace"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("record: %v\n%s", err, data)
	}
	if rec.Workflow != "e2e" || rec.StartNode != "main" || rec.ExecutionID == "" || rec.Status != "completed" ||
		rec.LastNode != "greet" || rec.Detail["status"] != "completed" || rec.WallMS == nil ||
		rec.Trace.ExecutionID != rec.ExecutionID || len(rec.Trace.Entries) != 2 {
		t.Fatalf("record:\n%s", data)
	}
	if rec.Cost["node_executions"] != 2 || rec.Cost["workflow_starts"] != 1 || rec.Cost["workflow_completions"] != 1 {
		t.Fatalf("cost %v", rec.Cost)
	}
	first := rec.Trace.Entries[0]
	if first["node_id"] != "route" || first["kind"] != "switch" || first["outcome"] != "continue" || first["branch"] != "greet" {
		t.Fatalf("trace entry %v", first)
	}
}

func TestRunStdinEnvAndStart(t *testing.T) {
	_, wf := e2eWorkflow(t)
	r := kiln(t, nil, `{"action":"greet","name":"Bo"}`, "run", wf, "--input", "-", "--log-level", "off")
	if m := decodeOutcome(t, r); r.code != cli.ExitOK || m["final_value"].(map[string]any)["rendered"] != "Hi Bo <manual> {{trigger.n}}" {
		t.Fatalf("stdin: %d %s", r.code, r.stdout)
	}
	if r.stderr != "" {
		t.Fatalf("log level off still logged: %s", r.stderr)
	}
	// KILN_START picks the start node; --start beats it.
	r = kiln(t, []string{"KILN_START=alt", "KILN_LOG_LEVEL=off"}, "", "run", wf)
	if m := decodeOutcome(t, r); r.code != cli.ExitOK || m["last_node"] != "alt_entry" {
		t.Fatalf("KILN_START: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = kiln(t, []string{"KILN_START=alt", "KILN_LOG_LEVEL=off"}, `{"action":"nothing"}`, "run", "--config", wf, "--start", "main", "--input", "-")
	if m := decodeOutcome(t, r); r.code != cli.ExitOK || m["last_node"] != "route" {
		t.Fatalf("--start over env: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestRunExitCodes(t *testing.T) {
	dir, wf := e2eWorkflow(t)

	r := kiln(t, nil, `{"action":"reject"}`, "run", wf, "--input", "-")
	if m := decodeOutcome(t, r); r.code != cli.ExitFailed || m["status"] != "failed" || m["reason"] != "rejected by rule" {
		t.Fatalf("failed: %d %s", r.code, r.stdout)
	}

	outside := filepath.Join(dir, "outside.txt")
	r = kiln(t, nil, `{"action":"write","path":"`+outside+`","name":"x"}`, "run", wf, "--input", "-", "--log-format", "json")
	if m := decodeOutcome(t, r); r.code != cli.ExitFailed || m["status"] != "errored" || m["last_node"] != "emit" {
		t.Fatalf("errored: %d %s", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "kiln: node emit (write_file): fs.write denied on "+outside+": not in the allowlist\n") {
		t.Fatalf("stderr lacks the error line:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, `"msg":"policy.denied"`) {
		t.Fatalf("no policy.denied audit event:\n%s", r.stderr)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatal("the denied write happened")
	}

	// dry-run via the environment: placeholder, nothing written.
	inside := filepath.Join(dir, "allowed", "f.txt")
	r = kiln(t, []string{"KILN_DRY_RUN=1"}, `{"action":"write","path":"`+inside+`","name":"x"}`, "run", wf, "--input", "-")
	if m := decodeOutcome(t, r); r.code != cli.ExitOK || m["final_value"].(map[string]any)["dry_run"] != true {
		t.Fatalf("dry-run: %d %s", r.code, r.stdout)
	}
	if _, err := os.Stat(inside); !os.IsNotExist(err) {
		t.Fatal("dry-run wrote the file")
	}

	state := filepath.Join(dir, "state")
	r = kiln(t, nil, `{"action":"approve"}`, "run", wf, "--input", "-", "--state-dir", state)
	m := decodeOutcome(t, r)
	if r.code != cli.ExitPaused || m["status"] != "paused" || m["reason"] != "needs a human" {
		t.Fatalf("paused: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(state, "runs", m["run_id"].(string)+".json")); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}

	r = kiln(t, nil, `{"action":"slow","path":"`+filepath.Join(dir, "allowed", "missing")+`"}`, "run", wf, "--input", "-", "--timeout-secs", "1")
	if m := decodeOutcome(t, r); r.code != cli.ExitFailed || m["status"] != "timed_out" || m["elapsed_ms"] == nil {
		t.Fatalf("timed out: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestRunLoadAndUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeWorkflow(t, dir, "name = \"x\"\n\n[[nodes]]\nid = \"a\"\ntype = \n")
	r := kiln(t, nil, "", "run", bad)
	if r.code != cli.ExitUsage || !strings.HasPrefix(r.stderr, bad+":5: ") || r.stdout != "" {
		t.Fatalf("parse error: %d %q", r.code, r.stderr)
	}

	invalid := filepath.Join(dir, "invalid.toml")
	os.WriteFile(invalid, []byte(`
name = "invalid"
[[start_nodes]]
name = "main"
source = "manual"
[[nodes]]
id = "s"
type = "switch"
expr = "trigger.v"
[[nodes]]
id = "a"
type = "merge"
[[nodes]]
id = "b"
type = "merge"
[[edges]]
from = "s"
to = "a"
when = "x"
[[edges]]
from = "s"
to = "b"
when = "x"
`), 0o644)
	r = kiln(t, nil, "", "run", invalid)
	var report struct {
		Workflow string `json:"workflow"`
		OK       *bool  `json:"ok"`
		Issues   []struct {
			Code, Message string
		} `json:"issues"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &report); err != nil || r.code != cli.ExitFailed {
		t.Fatalf("validation: %d %v\n%s", r.code, err, r.stderr)
	}
	if report.Workflow != "invalid" || report.OK == nil || *report.OK || len(report.Issues) == 0 || report.Issues[0].Code == "" {
		t.Fatalf("report %s", r.stderr)
	}
	// Same key order as `kiln check`.
	if !strings.HasPrefix(r.stderr, `{"workflow":"invalid","ok":false,"issues":[{"code":`) {
		t.Fatalf("report keys out of order: %s", r.stderr)
	}

	_, wf := e2eWorkflow(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "no workflow file given"},
		{[]string{"run", filepath.Join(dir, "missing.toml")}, "missing.toml"},
		{[]string{"run", wf, "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"run", wf, "--start", "nope"}, `kiln: unknown start node "nope"`},
		{[]string{"run", wf, "--input", filepath.Join(dir, "none.json")}, "kiln: --input:"},
		{[]string{"run", wf, "--record", "/proc/forbidden/x.json", "--log-level", "off"}, "kiln: --record:"},
	} {
		r := kiln(t, nil, `{"action":"greet"}`, c.args...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args[1:], r.code, r.stderr, cli.ExitUsage, c.want)
		}
	}
	r = kiln(t, nil, "", "run", "-h")
	if r.code != cli.ExitOK || !strings.Contains(r.stderr, "usage: kiln run WORKFLOW.toml") {
		t.Fatalf("help: %d %s", r.code, r.stderr)
	}
}

func TestRunWithoutPolicyWarns(t *testing.T) {
	dir := t.TempDir()
	wf := writeWorkflow(t, dir, `
name = "open"
[[start_nodes]]
name = "main"
source = "manual"
[[nodes]]
id = "t"
type = "terminate"
`)
	r := kiln(t, nil, "", "run", wf)
	if m := decodeOutcome(t, r); r.code != cli.ExitOK || m["status"] != "completed" || m["final_value"] != nil {
		t.Fatalf("%d %s", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "policy.allow_all") || !strings.Contains(r.stderr, "development only") {
		t.Fatalf("no allow-all warning:\n%s", r.stderr)
	}
}
