package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestHelpNamesTheCommand: -h starts with a usage line naming the program
// (or the caller's own line), not the flag package's "Usage of PROG:".
func TestHelpNamesTheCommand(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	r := run(t, wf, nil, "", "-h")
	if r.code != ExitOK || !strings.HasPrefix(r.stderr, "usage: agent [command] [flags]\n") ||
		!strings.Contains(r.stderr, "KILN_NAME") || !strings.Contains(r.stderr, "-timeout-secs") {
		t.Fatalf("help: exit %d\n%s", r.code, r.stderr)
	}
	// --config is refused when given, so the help does not offer it; the
	// defaults of the flags it does show are still printed.
	if strings.Contains(r.stderr, "-config") || !strings.Contains(r.stderr, "(default 25)") {
		t.Fatalf("help lists -config or lost defaults:\n%s", r.stderr)
	}
	var out, errb strings.Builder
	code := Main([]string{"--no-such-flag"}, Options{Prog: "kiln", Workflow: wf, Stdout: &out, Stderr: &errb,
		Usage: "usage: kiln run wf.toml [flags] [once|serve]", Env: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errb.String(), "flag provided but not defined: -no-such-flag\nusage: kiln run wf.toml") {
		t.Fatalf("bad flag: exit %d\n%s", code, errb.String())
	}
}

// TestSealedHelpListsEveryCommand: a sealed binary's -h lists each of its
// subcommands exactly once.
func TestSealedHelpListsEveryCommand(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	var out, errb strings.Builder
	code := Main([]string{"-h"}, Options{Prog: "agent", Workflow: wf, Sealed: true, Stdout: &out, Stderr: &errb,
		Env: func(string) string { return "" }})
	if code != ExitOK {
		t.Fatalf("-h: exit %d\n%s", code, errb.String())
	}
	for _, c := range []string{"once", "serve", "manifest", "verify", "needs", "version"} {
		if n := strings.Count(errb.String(), "\n  "+c+" "); n != 1 {
			t.Errorf("-h lists %q %d times:\n%s", c, n, errb.String())
		}
	}
}

// TestFlagsAfterSubcommand: flags may follow the subcommand, as with Go
// tools (`BIN once --input F`), and a bad one there is still refused.
func TestFlagsAfterSubcommand(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte(`{"text":"after"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, wf, nil, "", "once", "--input", in, "--quiet")
	if r.code != ExitOK || !strings.Contains(r.stdout, `"after"`) {
		t.Fatalf("once --input: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	r = run(t, wf, nil, "", "needs", "--no-such-flag")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "no-such-flag") {
		t.Fatalf("needs --no-such-flag: exit %d %s", r.code, r.stderr)
	}
	r = run(t, wf, nil, "", "once", "serve")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `unexpected argument "once"`) {
		t.Fatalf("two subcommands: exit %d %s", r.code, r.stderr)
	}
}
