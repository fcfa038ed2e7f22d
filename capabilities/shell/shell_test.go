package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// sh is the real path of /bin/sh on this machine (policy matches resolved
// paths, and /bin/sh is usually a symlink).
func sh(t *testing.T) string {
	t.Helper()
	p, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		testtool.Missing(t, "no /bin/sh: %v", err)
	}
	return p
}

func program(t testing.TB, src string) *runtime.Program {
	t.Helper()
	var wf workflow.Workflow
	md, err := toml.Decode(src, &wf)
	if err != nil {
		t.Fatal(err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Fatalf("undecoded %v", und)
	}
	p, err := runtime.Compile(&wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// node is a one-node shell_run workflow running command with trigger.args.
func node(command, extra string) string {
	return fmt.Sprintf(`
name = "sh"
%s
[[nodes]]
id = "run"
type = "shell_run"
command = %q
args_from = "trigger.args"
`, extra, command)
}

func runIt(t testing.TB, p *runtime.Program, args []any, opts runtime.RunOptions) (*runtime.Report, map[string]any) {
	t.Helper()
	opts.Trigger = runtime.MakeTrigger("manual", map[string]any{"args": args})
	rep := (&runtime.Engine{}).Run(context.Background(), p, opts)
	out, _ := rep.Outcome.FinalValue.(map[string]any)
	if len(rep.Trace.Entries) > 0 && out == nil {
		out, _ = rep.Trace.Entries[0].Output.(map[string]any)
	}
	return rep, out
}

func TestOutputShape(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	rep, out := runIt(t, p, []any{"-c", `printf 'hello %s' "$1"; printf oops >&2`, "sh", "world"}, runtime.RunOptions{})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if out["command"] != "/bin/sh" || out["stdout"] != "hello world" || out["stderr"] != "oops" ||
		out["exit_code"] != json.Number("0") || out["signal"] != nil || out["truncated"] != false || out["timed_out"] != false {
		t.Fatalf("output %v", out)
	}
	if a := out["args"].([]any); len(a) != 4 || a[3] != "world" {
		t.Fatalf("args %v", out["args"])
	}
	if _, ok := out["duration_ms"].(json.Number); !ok {
		t.Fatalf("duration_ms %v", out["duration_ms"])
	}
	if rep.Trace.Entries[0].Branch != nil {
		t.Fatalf("branch %v", rep.Trace.Entries[0].Branch)
	}
}

func TestNonZeroExitRoutesErrorBranch(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	rep, out := runIt(t, p, []any{"-c", "exit 3"}, runtime.RunOptions{})
	if rep.Trace.Entries[0].Branch != "error" || out["exit_code"] != json.Number("3") {
		t.Fatalf("entry %+v", rep.Trace.Entries[0])
	}
}

func TestEnvironmentClearedAndStdinClosed(t *testing.T) {
	t.Setenv("KILN_SHELL_TEST_SECRET", "must-not-leak")
	p := program(t, node("/bin/sh", ""))
	rep, out := runIt(t, p, []any{"-c", "env | sort; cat; echo stdin-closed"}, runtime.RunOptions{})
	want := "KILN_IDEMPOTENCY_KEY=" + idempotencyKey(rep.ExecutionID, "run") +
		"\nLANG=C.UTF-8\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nPWD="
	if s := out["stdout"].(string); !strings.HasPrefix(s, want) || strings.Contains(s, "must-not-leak") ||
		!strings.HasSuffix(s, "stdin-closed\n") || strings.Count(s, "=") != 4 {
		t.Fatalf("stdout %q", s)
	}
}

func TestOutputCapped(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	_, out := runIt(t, p, []any{"-c", "i=0; while [ $i -lt 2000 ]; do echo 0123456789012345678901234567890123456789012345678901234567890123456789; i=$((i+1)); done; echo small >&2"}, runtime.RunOptions{})
	if s := out["stdout"].(string); len(s) != OutputCap {
		t.Fatalf("stdout %d bytes", len(s))
	}
	if out["truncated"] != true || out["stderr"] != "small\n" || out["exit_code"] != json.Number("0") {
		t.Fatalf("output truncated=%v stderr=%q exit=%v", out["truncated"], out["stderr"], out["exit_code"])
	}
}

func TestTimeoutKillsProcessGroup(t *testing.T) {
	p := program(t, strings.Replace(node("/bin/sh", ""), `args_from = "trigger.args"`, "args_from = \"trigger.args\"\ntimeout_secs = 1", 1))
	start := time.Now()
	// The grandchild prints its pid, then both sleep far past the timeout.
	rep, out := runIt(t, p, []any{"-c", "sleep 30 & echo $!; wait"}, runtime.RunOptions{})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
	if rep.Trace.Entries[0].Branch != "error" || out["timed_out"] != true || out["signal"] != "SIGKILL" || out["exit_code"] != nil {
		t.Fatalf("output %v", out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out["stdout"].(string)))
	if err != nil {
		t.Fatalf("stdout %q", out["stdout"])
	}
	// The grandchild was killed with the group (allow reaping by init).
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(stat), ") Z ") {
			break // a zombie is dead
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunDeadlineKillsAndTimesOutRun(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	start := time.Now()
	rep, _ := runIt(t, p, []any{"-c", "sleep 30"}, runtime.RunOptions{Timeout: 300 * time.Millisecond})
	if rep.Outcome.Status != runtime.StatusTimedOut {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestSymlinkEscapeDenied(t *testing.T) {
	real := sh(t)
	tools := t.TempDir()
	// The policy allows anything under tools/; a link placed there points
	// at a shell outside it. The check runs on the resolved path: denied,
	// nothing runs.
	link := filepath.Join(tools, "innocent")
	if err := os.Symlink("/bin/sh", link); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	allowTools := fmt.Sprintf("[policy.shell]\ncommands = [%q]", tools+"/**")
	p := program(t, node(link, allowTools))
	rep, _ := runIt(t, p, []any{"-c", "touch " + marker}, runtime.RunOptions{})
	o := rep.Outcome
	if o.Status != runtime.StatusErrored || !strings.Contains(o.Reason, "denied on "+real) || !strings.Contains(o.Reason, "node run (shell_run)") {
		t.Fatalf("outcome %+v", o)
	}
	if rep.Counters.Snapshot()["policy_denials"] != 1 {
		t.Fatal("denial not counted")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("command ran despite the denial")
	}
	// A real binary inside tools/ runs.
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(tools, "mysh")
	if err := os.WriteFile(own, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p = program(t, node(own, allowTools))
	rep, out := runIt(t, p, []any{"-c", "touch " + marker}, runtime.RunOptions{})
	if rep.Outcome.Status != runtime.StatusCompleted || out["command"] != own {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal(err)
	}
}

func TestDryRunChecksPolicyButDoesNotSpawn(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	p := program(t, node("/bin/sh", fmt.Sprintf("[policy.shell]\ncommands = [%q]", sh(t))))
	rep, out := runIt(t, p, []any{"-c", "touch " + marker}, runtime.RunOptions{DryRun: true})
	if rep.Outcome.Status != runtime.StatusCompleted || out["dry_run"] != true {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("dry run spawned the command")
	}
	p = program(t, node("/bin/sh", "[policy.shell]\ncommands = [\"/usr/bin/git\"]"))
	if rep, _ := runIt(t, p, nil, runtime.RunOptions{DryRun: true}); rep.Outcome.Status != runtime.StatusErrored {
		t.Fatalf("dry run skipped the policy: %+v", rep.Outcome)
	}
}

func TestBadArgsAndCommands(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	for _, args := range []any{"-c ls", []any{"-c", json.Number("1")}} {
		rep := (&runtime.Engine{}).Run(context.Background(), p, runtime.RunOptions{
			Trigger: runtime.MakeTrigger("manual", map[string]any{"args": args})})
		if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "node run (shell_run): args_from") {
			t.Fatalf("args %v: %+v", args, rep.Outcome)
		}
	}
	p = program(t, node("/nonexistent/tool", ""))
	if rep, _ := runIt(t, p, nil, runtime.RunOptions{}); !strings.Contains(rep.Outcome.Reason, "cannot be resolved") {
		t.Fatalf("missing command: %+v", rep.Outcome)
	}
	for _, src := range []string{node("sh", ""), node("bin/sh", ""), strings.Replace(node("/bin/sh", ""), `args_from = "trigger.args"`, "timeout_secs = 0", 1)} {
		var wf workflow.Workflow
		if _, err := toml.Decode(src, &wf); err != nil {
			t.Fatal(err)
		}
		if _, err := runtime.Compile(&wf, runtime.CompileOptions{}); err == nil || !strings.Contains(err.Error(), "node run (shell_run)") {
			t.Fatalf("compiled %q: %v", src, err)
		}
	}
}
