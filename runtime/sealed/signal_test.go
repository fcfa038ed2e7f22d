package sealed_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// blocked is closed by the sealedtest_block node once it runs; the node
// then waits for its run to be cancelled.
var blocked = make(chan struct{})

func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "sealedtest_block", Family: "sealedtest",
		Prepare: func(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				close(blocked)
				select {
				case <-ctx.Done():
					return runtime.Result{}, ctx.Err()
				case <-time.After(30 * time.Second):
					return runtime.Next(nil), nil
				}
			}, nil
		}})
}

// TestOneShotRunStopsOnSIGTERM: a sealed one-shot run catches SIGTERM and
// ends the run with its outcome printed (exit 5), instead of dying of the
// signal. This test binary links no extension with a Setup hook, so the
// CLI registers for signals after confinement, just before the run: the
// registration must still happen before the first node runs.
func TestOneShotRunStopsOnSIGTERM(t *testing.T) {
	wf, _, _ := fixture("go1.99")
	wf.Nodes = []workflow.Node{{ID: "b", Type: "sealedtest_block"}}
	tables, err := manifest.TablesDigest(wf)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Schema: manifest.Schema, Workflow: manifest.Workflow{Name: wf.Name, Digest: digest},
		KilnVersion: "v9.9.9", Inputs: []manifest.Input{{Path: "workflow.toml", Kind: "workflow", SHA256: digest}}, TablesSHA256: tables}
	raw, err := manifest.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errb := run(t, wf, []byte(manifest.Wrap(raw)), "--quiet")
		done <- result{code, out, errb}
	}()
	select {
	case <-blocked:
	case r := <-done:
		t.Fatalf("the run ended before its node ran: exit %d\n%s%s", r.code, r.out, r.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("the node never ran")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != cli.ExitFailed || !strings.Contains(r.out, `"status": "errored"`) {
			t.Fatalf("after SIGTERM: exit %d, want %d with the errored outcome\n%s%s", r.code, cli.ExitFailed, r.out, r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not end the run")
	}
}
