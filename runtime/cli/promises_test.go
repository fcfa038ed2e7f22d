package cli

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const mib = 1 << 20

// limitsChild is set in the re-executed test binary: resource limits are
// per process, so the checks that change them run in a child and never
// touch the limits of the test process itself.
const limitsChild = "KILN_LIMITS_PROMISE_CHILD"

// inChild re-runs the calling test in a fresh process with limitsChild
// set and reports whether this is that child. The parent fails unless the
// child passed and printed done, so a child that never ran its checks
// cannot pass.
func inChild(t *testing.T, done string) bool {
	t.Helper()
	if os.Getenv(limitsChild) == "1" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), limitsChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), done) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	return false
}

func rlimit(t *testing.T, resource int) syscall.Rlimit {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(resource, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

func setRlimit(t *testing.T, resource int, cur, max uint64) {
	t.Helper()
	if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: cur, Max: max}); err != nil {
		t.Fatal(err)
	}
}

// lower never raises a soft or hard limit, even for a process allowed to
// (root may raise its hard limits), and keeps soft <= hard. It is checked
// on RLIMIT_CORE, which nothing in the test process needs (the race
// detector cannot live under a small RLIMIT_DATA).
func TestLowerNeverRaisesALimit(t *testing.T) {
	if !inChild(t, "lower: all checks ran") {
		return
	}
	setRlimit(t, syscall.RLIMIT_CORE, 512*mib, 1024*mib)
	steps := []struct {
		name             string
		cur, max         uint64 // asked of lower
		wantCur, wantMax uint64 // the limits after it
	}{
		{"both higher: unchanged", 2048 * mib, 4096 * mib, 512 * mib, 1024 * mib},
		{"soft lower, hard higher", 256 * mib, 2048 * mib, 256 * mib, 1024 * mib},
		{"hard below the soft limit", 1024 * mib, 128 * mib, 128 * mib, 128 * mib},
		{"no limit asked: unchanged", ^uint64(0), ^uint64(0), 128 * mib, 128 * mib},
	}
	for _, s := range steps {
		if _, err := lower(syscall.RLIMIT_CORE, s.cur, s.max); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := rlimit(t, syscall.RLIMIT_CORE); got.Cur != s.wantCur || got.Max != s.wantMax {
			t.Fatalf("%s: limits %d/%d MiB, want %d/%d MiB", s.name, got.Cur/mib, got.Max/mib, s.wantCur/mib, s.wantMax/mib)
		}
	}
	t.Log("lower: all checks ran")
}

// raceBuild reports whether the test binary has the race detector, whose
// shadow memory does not fit under a small RLIMIT_DATA.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// [budget] sets RLIMIT_DATA to max_memory_mb, the Go soft memory limit to
// 90 % of it (so the collector works before the hard cap), and the CPU
// limit to max_cpu_secs (hard one second later); a budget above limits
// the process already has leaves them as they are.
func TestBudgetSetsLimitsAndGoMemoryLimit(t *testing.T) {
	if raceBuild() {
		t.Skip("the race detector needs more memory than the budget allows (as TestBudgetMemoryLimit)")
	}
	if !inChild(t, "budget: all checks ran") {
		return
	}
	audit := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := applyBudget(&workflow.Budget{MaxMemoryMB: 300, MaxCPUSecs: 3600}, io.Discard, "t", audit, func() {}); err != nil {
		t.Fatal(err)
	}
	if got := rlimit(t, syscall.RLIMIT_DATA); got.Cur != 300*mib || got.Max != 300*mib {
		t.Errorf("RLIMIT_DATA %d/%d, want 300 MiB both", got.Cur, got.Max)
	}
	if got, want := debug.SetMemoryLimit(-1), int64(300*mib)/10*9; got != want {
		t.Errorf("Go soft memory limit %d, want %d (90 %% of max_memory_mb)", got, want)
	}
	if got := rlimit(t, syscall.RLIMIT_CPU); got.Cur != 3600 || got.Max != 3601 {
		t.Errorf("RLIMIT_CPU %d/%d, want 3600/3601", got.Cur, got.Max)
	}

	// A larger budget never raises what is already set.
	if err := applyBudget(&workflow.Budget{MaxMemoryMB: 1024, MaxCPUSecs: 7200}, io.Discard, "t", audit, func() {}); err != nil {
		t.Fatal(err)
	}
	if got := rlimit(t, syscall.RLIMIT_DATA); got.Cur != 300*mib || got.Max != 300*mib {
		t.Errorf("a larger budget raised RLIMIT_DATA to %d/%d", got.Cur, got.Max)
	}
	if got := rlimit(t, syscall.RLIMIT_CPU); got.Cur != 3600 || got.Max != 3601 {
		t.Errorf("a larger budget raised RLIMIT_CPU to %d/%d", got.Cur, got.Max)
	}

	// Negative budgets are refused before anything is set.
	if err := applyBudget(&workflow.Budget{MaxMemoryMB: -1}, io.Discard, "t", audit, func() {}); err == nil {
		t.Error("negative max_memory_mb accepted")
	}
	if err := applyBudget(&workflow.Budget{MaxCPUSecs: -1}, io.Discard, "t", audit, func() {}); err == nil {
		t.Error("negative max_cpu_secs accepted")
	}
	t.Log("budget: all checks ran")
}

// The preflight report, without an --approvals file: listed by id; the
// network, filesystem and capability needs the compiled [policy] approves
// say so; an empty secret file provides nothing; a blocked start names
// exactly the unmet needs.
func TestPreflightReportDetails(t *testing.T) {
	dir := t.TempDir()
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	wf.Source = filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(filepath.Join(dir, "empty.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wf.Secrets = []workflow.Secret{{Name: "EMPTY", Source: "file", Path: "empty.txt"}}
	src := []string{"workflow:w"}
	b := &Build{Needs: &needs.Effective{Workflow: "w", Needs: []needs.Need{
		secretNeed("EMPTY", false),
		{ID: "network:api.example.com", Kind: needs.KindNetwork, Host: "api.example.com", Sources: src},
		{ID: "filesystem:/srv/data:rw", Kind: needs.KindFilesystem, Path: "/srv/data", Mode: "rw", Sources: src},
		{ID: "capability:filesystem", Kind: needs.KindCapability, Type: "filesystem", Sources: src},
	}}}

	_, rep := runBuild(t, wf, b, nil, "needs")
	var ids []string
	for _, it := range rep.Needs {
		ids = append(ids, it.ID)
		want := "approved by the compiled [policy] (no --approvals file)"
		if it.Kind == needs.KindSecret {
			want = ""
		}
		if it.Kind != needs.KindSecret && (it.Status != needs.Satisfied || it.Detail != want) {
			t.Errorf("%s: %s, detail %q; want satisfied, %q", it.ID, it.Status, it.Detail, want)
		}
	}
	if got := strings.Join(ids, " "); got != "capability:filesystem filesystem:/srv/data:rw network:api.example.com secret:EMPTY" {
		t.Errorf("report order: %s", got)
	}
	if s := itemStatus(rep, "secret:EMPTY"); s != needs.Missing {
		t.Errorf("an empty secret file: %s", s)
	}
	r, _ := runBuild(t, wf, b, nil, "--log-level", "off")
	if r.code != ExitBlocked || !strings.Contains(r.stderr, "refusing to start: unmet needs secret:EMPTY (see `needs`") {
		t.Errorf("blocked start: exit %d, %s", r.code, r.stderr)
	}
}

// TestExitsLeavesSignalsCaught: with Exits (a sealed binary's main), SIGINT
// and SIGTERM stay caught after Main returns instead of being handed back
// to the runtime, so a signal between the end of the run and the exit
// changes nothing: here the child survives its own SIGTERM.
func TestExitsLeavesSignalsCaught(t *testing.T) {
	if !inChild(t, "signals: all checks ran") {
		return
	}
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	var out, errb bytes.Buffer
	code := Main([]string{"--quiet"}, Options{Prog: "agent", Workflow: wf, Exits: true, Stdout: &out, Stderr: &errb,
		Env: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a SIGTERM not caught ends the process before this returns
	fmt.Println("signals: all checks ran")
}
