package shell

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/beneath/beneathtest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/testtool"
)

func idempotencyKey(runID, nodeID string) string {
	sum := sha256.Sum256([]byte(runID + "." + nodeID))
	return hex.EncodeToString(sum[:])
}

// alive reports whether pid is a running process (a zombie is dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// waitDead fails unless every pid is dead within a generous bound.
func waitDead(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still alive", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// killLeftovers kills, at the end of the test, any of pids still running
// a command line containing what (so a reused pid is left alone).
func killLeftovers(t *testing.T, what string, pids *[]int) {
	t.Cleanup(func() {
		for _, pid := range *pids {
			if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), what) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// readPids waits (bounded) for file to hold whitespace-separated pids.
func readPids(t *testing.T, file string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(file)
		if f := strings.Fields(string(data)); err == nil && len(f) == n {
			pids := make([]int, n)
			for i, s := range f {
				if pids[i], err = strconv.Atoi(s); err != nil {
					t.Fatalf("pid file %q", data)
				}
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pids in %s after 10 s", file)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIdempotencyKeyInEnvironment(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	key := func(runID string) string {
		rep, out := runIt(t, p, []any{"-c", `printf %s "$KILN_IDEMPOTENCY_KEY"`}, runtime.RunOptions{ExecutionID: runID})
		if rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("outcome %+v", rep.Outcome)
		}
		return out["stdout"].(string)
	}
	// A resumed run keeps its run id, so the key stays the same.
	first, again, other := key("run-a"), key("run-a"), key("run-b")
	if first != idempotencyKey("run-a", "run") || again != first {
		t.Fatalf("key %q then %q, want %q", first, again, idempotencyKey("run-a", "run"))
	}
	if other != idempotencyKey("run-b", "run") || other == first {
		t.Fatalf("another run's key %q", other)
	}
}

// The command's whole group is killed however the run ends: the script's
// background sleep dies with it on success, on error and on cancel.
func TestGroupKilledWhenTheCommandEnds(t *testing.T) {
	p := program(t, node("/bin/sh", ""))
	var pids []int
	killLeftovers(t, "sleep", &pids)
	for _, exit := range []string{"0", "3"} {
		_, out := runIt(t, p, []any{"-c", "sleep 300 & echo $!; exit " + exit}, runtime.RunOptions{})
		pid, err := strconv.Atoi(strings.TrimSpace(out["stdout"].(string)))
		if err != nil {
			t.Fatalf("exit %s: output %v", exit, out)
		}
		pids = append(pids, pid)
		if fmt.Sprint(out["exit_code"]) != exit {
			t.Fatalf("exit %s: output %v", exit, out)
		}
		waitDead(t, pid)
	}

	pidFile := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *runtime.Report)
	go func() {
		done <- (&runtime.Engine{}).Run(ctx, p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual",
			map[string]any{"args": []any{"-c", "sleep 300 & echo $$ $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait"}})})
	}()
	got := readPids(t, pidFile, 2)
	pids = append(pids, got...)
	cancel()
	rep := <-done
	if rep.Outcome.Status == runtime.StatusCompleted {
		t.Fatalf("canceled run completed: %+v", rep.Outcome)
	}
	waitDead(t, got...)
}

// TestHelperKiln is not a test: TestOrphansDieWithKiln runs this test
// binary again to play a kiln process that it then kills with SIGKILL.
func TestHelperKiln(t *testing.T) {
	pidFile := os.Getenv("KILN_SHELL_TEST_PIDFILE")
	if pidFile == "" {
		t.Skip("helper process for TestOrphansDieWithKiln")
	}
	p := program(t, node("/bin/sh", ""))
	runIt(t, p, []any{"-c", "sleep 300 & echo $$ $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait"}, runtime.RunOptions{})
	t.Fatal("the workflow ended: the test should have killed this process")
}

// kill -9 of kiln takes the running command and everything it started
// down with it: nothing is left to run beside a resumed node.
func TestOrphansDieWithKiln(t *testing.T) {
	need(t, "/bin/sh")
	pidFile := filepath.Join(t.TempDir(), "pids")
	kiln := exec.Command(os.Args[0], "-test.run=^TestHelperKiln$", "-test.count=1")
	kiln.Env = append(os.Environ(), "KILN_SHELL_TEST_PIDFILE="+pidFile)
	if err := kiln.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kiln.Process.Kill(); kiln.Wait() })
	pids := readPids(t, pidFile, 2) // sh, sleep
	killLeftovers(t, "sleep", &pids)
	// sh's parent is the supervisor: it must go too.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pids[0]))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	supervisor, _ := strconv.Atoi(f[1])
	if supervisor == kiln.Process.Pid {
		t.Fatalf("the command's parent is kiln itself, not a supervisor")
	}
	pids = append(pids, supervisor)

	if err := kiln.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	kiln.Wait()
	waitDead(t, pids...)
}

// The file that runs is the descriptor the check opened: a script sees
// itself as /proc/self/fd/3, and argv[0] stays the command as written.
func TestExecutesTheCheckedDescriptor(t *testing.T) {
	need(t, "/bin/sh")
	tools := t.TempDir()
	script := filepath.Join(tools, "whoami")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s %s' \"$0\" \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := program(t, node(script, fmt.Sprintf("[policy.shell]\ncommands = [%q]", tools+"/**")))
	rep, out := runIt(t, p, []any{"arg"}, runtime.RunOptions{})
	if rep.Outcome.Status != runtime.StatusCompleted || out["stdout"] != "/proc/self/fd/3 arg" {
		t.Fatalf("outcome %+v output %v", rep.Outcome, out)
	}
	// A binary: the shell reports its own argv[0] (the command as written).
	p = program(t, node("/bin/sh", ""))
	if _, out := runIt(t, p, []any{"-c", `printf %s "$0"`}, runtime.RunOptions{}); out["stdout"] != "/bin/sh" {
		t.Fatalf("argv[0] %v", out["stdout"])
	}
}

func TestStartErrorNamesTheCommand(t *testing.T) {
	tools := t.TempDir()
	plain := filepath.Join(tools, "plain")
	if err := os.WriteFile(plain, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := program(t, node(plain, ""))
	rep, _ := runIt(t, p, nil, runtime.RunOptions{})
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "start "+plain+": permission denied") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}

// A command swapped for a symlink to another binary between the policy
// check and the exec cannot make that binary run.
func TestSwappedCommandNeverRuns(t *testing.T) {
	need(t, "/bin/sh")
	root := t.TempDir()
	tools, outside := filepath.Join(root, "tools"), filepath.Join(root, "outside")
	for _, d := range []string{tools, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	marker := filepath.Join(outside, "evil-ran")
	evil := filepath.Join(outside, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\necho evil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(tools, "good")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho good\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The policy is compiled (its patterns resolved) before the swapping.
	p := program(t, node(good, fmt.Sprintf("[policy.shell]\ncommands = [%q]", good)))
	// tools/good and tools/alt trade places: the script, then a link to evil.
	alt := filepath.Join(tools, "alt")
	if err := os.Symlink(evil, alt); err != nil {
		t.Fatal(err)
	}
	stop := beneathtest.Swap(t, good, alt)
	ran, refused := 0, 0
	for range 1000 {
		rep, out := runIt(t, p, nil, runtime.RunOptions{})
		switch {
		case rep.Outcome.Status == runtime.StatusCompleted && out["stdout"] == "good\n":
			ran++
		case rep.Outcome.Status == runtime.StatusErrored:
			refused++
		default:
			stop()
			t.Fatalf("outcome %+v output %v", rep.Outcome, out)
		}
	}
	swaps := stop()
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the swapped-in binary ran")
	}
	t.Logf("%d runs, %d refused, %d swaps", ran, refused, swaps)
	if ran == 0 || swaps == 0 {
		t.Fatal("the race was not exercised")
	}
}

// need skips a test whose tool is missing, loudly, and fails it in CI.
func need(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		testtool.Missing(t, "%s is missing: %v", path, err)
	}
}
