package cli

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestHelpNamesTheCommand: -h starts with a usage line naming the program
// (or the caller's own line), not the flag package's "Usage of PROG:".
func TestHelpNamesTheCommand(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	r := run(t, wf, nil, "", "-h")
	if r.code != ExitOK || !strings.HasPrefix(r.stderr, "usage: agent [flags] [once|serve]\n") ||
		!strings.Contains(r.stderr, "KILN_NAME") || !strings.Contains(r.stderr, "-timeout-secs") {
		t.Fatalf("help: exit %d\n%s", r.code, r.stderr)
	}
	// --config is refused when given, so the help does not offer it; the
	// defaults of the flags it does show are still printed.
	if strings.Contains(r.stderr, "-config") || !strings.Contains(r.stderr, "(default 30)") {
		t.Fatalf("help lists -config or lost defaults:\n%s", r.stderr)
	}
	var out, errb strings.Builder
	code := Main([]string{"--no-such-flag"}, Options{Prog: "kiln", Workflow: wf, Stdout: &out, Stderr: &errb,
		Usage: "usage: kiln run wf.toml [flags] [once|serve]", Env: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errb.String(), "flag provided but not defined: -no-such-flag\nusage: kiln run wf.toml") {
		t.Fatalf("bad flag: exit %d\n%s", code, errb.String())
	}
}
