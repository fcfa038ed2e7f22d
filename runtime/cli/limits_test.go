package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var sink [][]byte

func init() {
	// limtest_alloc allocates and touches trigger.mb MiB.
	runtime.RegisterNode(runtime.NodeKind{Kind: "limtest_alloc", Family: "limtest",
		Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				n, _ := c.Run.Trigger()["mb"].(json.Number).Int64()
				for i := int64(0); i < n; i++ {
					b := make([]byte, 1<<20)
					for j := 0; j < len(b); j += 4096 {
						b[j] = 1
					}
					sink = append(sink, b)
				}
				return runtime.Next(n), nil
			}, nil
		}})
	// The limtest extension's Close writes the file $LIMTEST_CLOSED, so a
	// test can see Close ran in a helper process.
	runtime.RegisterExtension(runtime.Extension{Name: "limtest", Close: func() error {
		if p := os.Getenv("LIMTEST_CLOSED"); p != "" {
			return os.WriteFile(p, []byte("closed"), 0o600)
		}
		return nil
	}})
	// limtest_spin burns CPU until its context ends.
	runtime.RegisterNode(runtime.NodeKind{Kind: "limtest_spin", Family: "limtest",
		Prepare: func(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				x := 0
				for ctx.Err() == nil {
					for i := 0; i < 1e6; i++ {
						x += i
					}
				}
				return runtime.Next(x), nil
			}, nil
		}})
}

func TestBudgetMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector needs more memory than the budget allows")
	}
	dir := t.TempDir()
	wf := filepath.Join(dir, "mem.toml")
	writeFile(t, wf, "name = \"mem\"\n[budget]\nmax_memory_mb = 96\n[[nodes]]\nid = \"a\"\ntype = \"limtest_alloc\"\n")
	small, big := filepath.Join(dir, "small.json"), filepath.Join(dir, "big.json")
	writeFile(t, small, `{"mb": 8}`)
	writeFile(t, big, `{"mb": 400}`)
	if out, stderr, code := kiln(t, wf, "--input", small, "--quiet"); code != cli.ExitOK || !strings.Contains(out, `"status"`) {
		t.Fatalf("within the budget: exit %d\n%s\n%s", code, out, stderr)
	}
	stdout, stderr, code := kiln(t, wf, "--input", big, "--quiet")
	// Reaching the cap ends the process inside the Go runtime: usually
	// "fatal error: runtime: out of memory", but Go 1.26's collector can
	// also fault on a failed mmap of its own metadata (seen in CI as a
	// SIGSEGV in runtime.(*spanQueue).tryDrain). Either way the run must
	// not complete.
	died := strings.Contains(stderr, "out of memory") ||
		strings.Contains(stderr, "fatal error") || strings.Contains(stderr, "SIGSEGV")
	if code == cli.ExitOK || !died || strings.Contains(stdout, `"status"`) {
		t.Fatalf("over the budget: exit %d\n%.300s\n%.300s", code, stdout, stderr)
	}
}

func TestBudgetCPULimit(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "cpu.toml")
	writeFile(t, wf, "name = \"cpu\"\n[budget]\nmax_cpu_secs = 1\n[[nodes]]\nid = \"spin\"\ntype = \"limtest_spin\"\n")
	closed := filepath.Join(dir, "closed")
	t.Setenv("LIMTEST_CLOSED", closed)
	start := time.Now()
	_, stderr, code := kiln(t, wf, "--quiet", "--timeout-secs", "20")
	if code != cli.ExitFailed || !strings.Contains(stderr, "max_cpu_secs (1) exhausted") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("took %v", took)
	}
	// The extensions' Close hooks ran before the process stopped (queued
	// spans are flushed, child processes stopped).
	if data, err := os.ReadFile(closed); err != nil || string(data) != "closed" {
		t.Errorf("Close did not run on CPU exhaustion: %q %v", data, err)
	}
}

func TestBudgetCPULimitInheritedByCommands(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "child.toml")
	writeFile(t, wf, `
name = "child"
[budget]
max_cpu_secs = 1
[[nodes]]
id = "burn"
type = "shell_run"
command = "/bin/sh"
args_from = "trigger.args"
`)
	input := filepath.Join(dir, "in.json")
	writeFile(t, input, `{"args": ["-c", "while :; do :; done"]}`)
	stdout, stderr, code := kiln(t, wf, "--input", input, "--quiet", "--timeout-secs", "20")
	// The command dies of its own CPU limit; kiln itself used little CPU
	// and completes, the node on its error branch.
	if code != cli.ExitOK || !strings.Contains(stdout, `"signal": "SIGXCPU"`) {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
