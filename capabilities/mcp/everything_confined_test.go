package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// The Landlock implementation of runtime/confine.
	_ "github.com/kilnworks/kiln/capabilities/sandbox"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// confinedEnv makes this test binary confine itself before any test runs,
// with the ruleset derived from the reference-server workflow
// (everythingWorkflow) plus what the test harness itself touches: its
// JSON value is a confinedSpec.
const confinedEnv = "KILN_MCP_TEST_CONFINED"

type confinedSpec struct {
	Node, Script, Tmp string
	// WithoutTree leaves the server's module tree out of fs.read: the
	// control, where the server cannot start.
	WithoutTree bool
}

// init runs before TestMain and every test. Confinement cannot be lifted,
// so only a child that TestEverythingInteropConfined starts asks for it.
func init() {
	raw := os.Getenv(confinedEnv)
	if raw == "" || len(os.Args) > 1 && os.Args[1] == serverArg {
		return
	}
	os.Unsetenv(confinedEnv) // the stdio servers this process starts are not asked
	if err := confineSelf(raw); err != nil {
		fmt.Fprintln(os.Stderr, "confine:", err)
		os.Exit(7)
	}
}

// confineSelf applies the ruleset of the reference-server workflow, with
// the server's module tree in fs.read (a deployment declares it the same
// way: docs/sandbox.md) and the test's own TMPDIR read-write.
func confineSelf(raw string) error {
	var spec confinedSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return err
	}
	wf, err := gen.Decode("everything-interop.toml", []byte(everythingWorkflow(spec.Node, spec.Script)))
	if err != nil {
		return err
	}
	if wf.Policy == nil || wf.Policy.MCP == nil {
		return fmt.Errorf("the interop workflow has no [policy.mcp]")
	}
	tree := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(spec.Script))))) // .cache/npm
	tmp := []string{spec.Tmp + "/**"}
	wf.Policy.FS = &workflow.FSPolicy{Read: append([]string{tree + "/**"}, tmp...), Write: tmp, Delete: tmp}
	if spec.WithoutTree {
		wf.Policy.FS.Read = tmp
	}
	wf.Sandbox = &workflow.Sandbox{Landlock: "required"}
	confine.AllowInTest = true
	rep, err := confine.Apply(confine.Request{Workflow: wf})
	if err != nil {
		return err
	}
	if !rep.Confined {
		return fmt.Errorf("not confined: %s", rep.Detail)
	}
	fmt.Fprintf(os.Stderr, "CONFINED abi=%d enforced=%v rules=%d\n", rep.ABI, rep.Enforced, len(rep.Rules))
	return nil
}

// TestEverythingInteropConfined runs TestEverythingInterop (the reference
// server over stdio: tool calls, a resource read, its environment, and
// the update and creation triggers in serve mode) again in a child that
// confined itself first: the server starts inside the domain and the
// whole suite passes there. Landlock ABI 6 or later is required, so the
// child is fully confined (fs, TCP, scoping). The control: without the
// server's module tree in fs.read, the server cannot start and the suite
// fails, so the domain really is in force.
func TestEverythingInteropConfined(t *testing.T) {
	node, script := everythingScript(t)
	if os.Getenv(confinedEnv) != "" {
		t.Skip("already the confined child")
	}
	out, err := runConfinedInterop(t, confinedSpec{Node: node, Script: script})
	if err != nil || !strings.Contains(out, "CONFINED abi=") || !strings.Contains(out, "--- PASS: TestEverythingInterop ") ||
		strings.Contains(out, "--- SKIP") {
		t.Fatalf("the interop suite under confinement: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "CONFINED ") {
			t.Log(line)
		}
	}

	out, err = runConfinedInterop(t, confinedSpec{Node: node, Script: script, WithoutTree: true})
	if err == nil || !strings.Contains(out, "CONFINED abi=") || !strings.Contains(out, "MCP server everything: initialize") {
		t.Fatalf("control: the suite passed with the server's files outside the domain: %v\n%s", err, out)
	}
}

// runConfinedInterop runs TestEverythingInterop in a child of this test
// binary that confines itself first, and returns what it printed.
func runConfinedInterop(t *testing.T, spec confinedSpec) (string, error) {
	t.Helper()
	spec.Tmp = t.TempDir()
	data, _ := json.Marshal(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEverythingInterop$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), confinedEnv+"="+string(data), "TMPDIR="+spec.Tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("confined child (without the module tree: %v) ran in %v", spec.WithoutTree, time.Since(start).Round(time.Millisecond))
	if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == 7 && strings.Contains(out.String(), "landlock") {
		testtool.Missing(t, "this machine cannot confine the interop suite: %s", out.String())
	}
	return out.String(), err
}
