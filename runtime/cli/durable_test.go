package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/shell"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestDurableHelperProcess is not a test: it is the "kiln run" process the
// tests below start (os.Args[0] re-executed), so every run and resume
// happens in a fresh process, as after a restart or a crash.
func TestDurableHelperProcess(t *testing.T) {
	if os.Getenv("DURABLE_TEST_HELPER") != "1" {
		t.Skip("helper process")
	}
	path := os.Getenv("DURABLE_TEST_WORKFLOW")
	data, err := os.ReadFile(path)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		syscall.Exit(99)
	}
	var wf workflow.Workflow
	if _, err := toml.Decode(string(data), &wf); err != nil {
		os.Stderr.WriteString(err.Error())
		syscall.Exit(99)
	}
	sum := sha256.Sum256(data)
	wf.Source, wf.Digest = path, hex.EncodeToString(sum[:])
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("DURABLE_TEST_ARGS")), &args); err != nil {
		syscall.Exit(99)
	}
	// syscall.Exit: the testing package treats os.Exit(0) inside a test
	// as a failure.
	syscall.Exit(cli.Main(args, cli.Options{Prog: "kiln", Workflow: &wf}))
}

// helper returns the command running the CLI on wfPath with args.
func helper(t *testing.T, wfPath string, args ...string) *exec.Cmd {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurableHelperProcess$")
	cmd.Env = append(os.Environ(), "DURABLE_TEST_HELPER=1", "DURABLE_TEST_WORKFLOW="+wfPath, "DURABLE_TEST_ARGS="+string(a))
	return cmd
}

// kiln runs the CLI in a new process and returns stdout, stderr and the
// exit code.
func kiln(t *testing.T, wfPath string, args ...string) (string, string, int) {
	t.Helper()
	cmd := helper(t, wfPath, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code == 99 {
		t.Fatalf("helper could not start: %s", stderr.String())
	}
	return stdout.String(), stderr.String(), code
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(data)
}

// appendStep is a shell_run node appending word to the log named by
// trigger.log (shell_run clears the environment: paths travel as args).
func appendStep(id, word string) string {
	return `
[[nodes]]
id = "` + id + `"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.` + id + `"
` + "\n# " + word + "\n"
}

func TestPausedRunResumedInNewProcesses(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	logPath := filepath.Join(dir, "log")
	wfPath := filepath.Join(dir, "approvals.toml")
	// count -> gate (pause) -> count again (loop edge, twice) | done.
	// The loop counter must survive each process exit, or the run never
	// leaves the loop.
	writeFile(t, wfPath, `
name = "approvals"
`+appendStep("count", "x")+`
[[nodes]]
id = "gate"
type = "pause_for_approval"
reason = "check the count"
`+appendStep("done", "done")+`
[[edges]]
from = "count"
to = "gate"
[[edges]]
from = "gate"
to = "count"
max_iterations = 2
[[edges]]
from = "gate"
to = "done"
`)
	input := filepath.Join(dir, "input.json")
	writeFile(t, input, `{"count": ["-c", "echo x >> \"$0\"", "`+logPath+`"], "done": ["-c", "echo done >> \"$0\"", "`+logPath+`"]}`)

	stdout, stderr, code := kiln(t, wfPath, "--input", input, "--state-dir", state, "--quiet")
	if code != cli.ExitPaused {
		t.Fatalf("first run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var paused struct {
		Status   string `json:"status"`
		RunID    string `json:"run_id"`
		Reason   string `json:"reason"`
		LastNode string `json:"last_node"`
	}
	if err := json.Unmarshal([]byte(stdout), &paused); err != nil {
		t.Fatal(err)
	}
	if paused.RunID == "" || paused.Reason != "check the count" || paused.LastNode != "gate" {
		t.Fatalf("paused outcome %s", stdout)
	}

	resumes := 0
	for code == cli.ExitPaused {
		if resumes++; resumes > 5 {
			t.Fatal("the run never left the loop: loop counters were not restored")
		}
		stdout, stderr, code = kiln(t, wfPath, "--resume", paused.RunID, "--state-dir", state, "--quiet")
	}
	if code != cli.ExitOK || resumes != 3 || !strings.Contains(stdout, `"status": "completed"`) {
		t.Fatalf("after %d resumes: exit %d\n%s\n%s", resumes, code, stdout, stderr)
	}
	if got := readLog(t, logPath); got != "x\nx\nx\ndone\n" {
		t.Fatalf("log %q", got)
	}
	// The completed run removed its checkpoint.
	if out, _, code := kiln(t, wfPath, "--list-checkpoints", "--state-dir", state); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after completion: %d %s", code, out)
	}
	// Resuming again is a usage error.
	if _, stderr, code := kiln(t, wfPath, "--resume", paused.RunID, "--state-dir", state); code != cli.ExitUsage || !strings.Contains(stderr, "no checkpoint") {
		t.Fatalf("second resume: %d %s", code, stderr)
	}
}

func TestResumeRefusesChangedWorkflow(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	wfPath := filepath.Join(dir, "wf.toml")
	src := `
name = "gated"
[[nodes]]
id = "gate"
type = "pause_for_approval"
[[nodes]]
id = "after"
type = "merge"
[[edges]]
from = "gate"
to = "after"
`
	writeFile(t, wfPath, src)
	stdout, _, code := kiln(t, wfPath, "--state-dir", state, "--quiet")
	if code != cli.ExitPaused {
		t.Fatalf("exit %d %s", code, stdout)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	json.Unmarshal([]byte(stdout), &out)
	writeFile(t, wfPath, src+"# edited after the pause\n")
	_, stderr, code := kiln(t, wfPath, "--resume", out.RunID, "--state-dir", state)
	if code != cli.ExitUsage || !strings.Contains(stderr, "different workflow") {
		t.Fatalf("changed workflow: exit %d %s", code, stderr)
	}
	list, _, _ := kiln(t, wfPath, "--list-checkpoints", "--state-dir", state)
	if !strings.Contains(list, `"state": "paused"`) || !strings.Contains(list, `"resumable": false`) {
		t.Fatalf("list %s", list)
	}
	writeFile(t, wfPath, src) // restored: resumable again
	if _, _, code := kiln(t, wfPath, "--resume", out.RunID, "--state-dir", state, "--quiet"); code != cli.ExitOK {
		t.Fatalf("resume with the original workflow: exit %d", code)
	}
}

func TestCrashThenResumeIncomplete(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	logPath := filepath.Join(dir, "log")
	marker := filepath.Join(dir, "slept-once")
	pidFile := filepath.Join(dir, "sleeper.pid")
	wfPath := filepath.Join(dir, "crashy.toml")
	writeFile(t, wfPath, `
name = "crashy"
`+appendStep("one", "one")+appendStep("two", "two")+appendStep("three", "three")+`
[[edges]]
from = "one"
to = "two"
[[edges]]
from = "two"
to = "three"
`)
	// Step two hangs the first time (the process is killed meanwhile) and
	// passes when re-run.
	two := `echo two >> "$0"; if [ ! -f "$1" ]; then touch "$1"; echo $$ > "$2"; exec sleep 30; fi`
	input, _ := json.Marshal(map[string]any{
		"one":   []string{"-c", `echo one >> "$0"`, logPath},
		"two":   []string{"-c", two, logPath, marker, pidFile},
		"three": []string{"-c", `echo three >> "$0"`, logPath},
	})
	inputPath := filepath.Join(dir, "input.json")
	writeFile(t, inputPath, string(input))

	cmd := helper(t, wfPath, "--input", inputPath, "--state-dir", state, "--checkpoint-each-node", "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var sleeper int
	t.Cleanup(func() {
		if sleeper > 0 {
			syscall.Kill(sleeper, syscall.SIGKILL)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if data, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(data), "\n") {
			sleeper, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("step two never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Crash: SIGKILL mid-run, while step two executes.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	syscall.Kill(sleeper, syscall.SIGKILL)

	list, _, code := kiln(t, wfPath, "--list-checkpoints", "--state-dir", state)
	var entries []map[string]any
	if err := json.Unmarshal([]byte(list), &entries); err != nil || code != 0 || len(entries) != 1 {
		t.Fatalf("list: %d %s", code, list)
	}
	e := entries[0]
	if e["state"] != "incomplete" || e["next_node"] != "two" || e["active"] != false || e["resumable"] != true {
		t.Fatalf("checkpoint after the crash %v", e)
	}

	stdout, stderr, code := kiln(t, wfPath, "--resume-incomplete", "--state-dir", state, "--quiet")
	if code != cli.ExitOK {
		t.Fatalf("resume-incomplete: exit %d\n%s\n%s", code, stdout, stderr)
	}
	var results []struct {
		RunID   string `json:"run_id"`
		Outcome struct {
			Status   string `json:"status"`
			LastNode string `json:"last_node"`
		} `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(stdout), &results); err != nil || len(results) != 1 ||
		results[0].RunID != e["run_id"] || results[0].Outcome.Status != "completed" || results[0].Outcome.LastNode != "three" {
		t.Fatalf("results %s", stdout)
	}
	// Step one ran once; step two, unfinished at the crash, ran again.
	if got := readLog(t, logPath); got != "one\ntwo\ntwo\nthree\n" {
		t.Fatalf("log %q", got)
	}
	// Nothing left to resume.
	if stdout, _, code := kiln(t, wfPath, "--resume-incomplete", "--state-dir", state); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Fatalf("second resume-incomplete: %d %s", code, stdout)
	}
}

func TestDurableFlagErrors(t *testing.T) {
	dir := t.TempDir()
	wfPath := filepath.Join(dir, "wf.toml")
	writeFile(t, wfPath, "name = \"w\"\n[[nodes]]\nid = \"m\"\ntype = \"merge\"\n")
	for _, args := range [][]string{
		{"--checkpoint-each-node"},
		{"--list-checkpoints"},
		{"--resume", "abc"},
		{"--resume", "abc", "--list-checkpoints", "--state-dir", dir},
		{"--resume", "../x", "--state-dir", dir},
	} {
		if _, stderr, code := kiln(t, wfPath, args...); code != cli.ExitUsage || stderr == "" {
			t.Fatalf("%v: exit %d %q", args, code, stderr)
		}
	}
}
