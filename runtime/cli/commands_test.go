package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// probeSetups counts the Setup runs of the clitest-probe family, whose
// commands report it.
var probeSetups atomic.Int32

func init() {
	runtime.RegisterExtension(runtime.Extension{Name: "clitest-probe",
		Setup: func(context.Context, *runtime.Host) error { probeSetups.Add(1); return nil },
		Commands: []runtime.Command{
			{Name: "probe show", Summary: "print what the probe saw", Run: func(_ context.Context, h *runtime.Host, w io.Writer) error {
				_, err := fmt.Fprintf(w, "workflow=%s setups=%d\n", h.Program.Workflow.Name, probeSetups.Load())
				return err
			}},
			{Name: "probe fail", Summary: "fail", Run: func(context.Context, *runtime.Host, io.Writer) error {
				return errors.New("the probe failed")
			}},
		}})
}

// TestFamilyCommands: a family's command runs in place of its family's
// Setup, with the compiled program, exits 0 or 2 with its error, and is
// listed in -h; words that are no command are refused.
func TestFamilyCommands(t *testing.T) {
	wf := simpleWF("cmd", workflow.Node{ID: "echo", Type: "cli_echo"})
	probeSetups.Store(0)
	if r := run(t, wf, nil, "", "probe", "show", "--quiet"); r.code != ExitOK || r.stdout != "workflow=cmd setups=0\n" {
		t.Fatalf("probe show: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, wf, nil, "", "probe", "fail", "--quiet"); r.code != ExitUsage || !strings.Contains(r.stderr, "probe fail: the probe failed") {
		t.Fatalf("probe fail: %d %s", r.code, r.stderr)
	}
	if r := run(t, wf, nil, "", "probe", "--quiet"); r.code != ExitUsage || !strings.Contains(r.stderr, `unexpected argument "probe"`) {
		t.Fatalf("probe alone: %d %s", r.code, r.stderr)
	}
	var out strings.Builder
	writeCommands(&out)
	if !strings.Contains(out.String(), "probe show") {
		t.Fatalf("-h commands:\n%s", out.String())
	}
	if r := run(t, wf, nil, "", "--quiet"); r.code != ExitOK || probeSetups.Load() != 1 {
		t.Fatalf("an ordinary run: %d, %d setups", r.code, probeSetups.Load())
	}
}
