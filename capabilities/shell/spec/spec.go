// Package spec declares the shell family's node kind, shell_run (see
// docs/reference.md). It holds data and checks only, so the generator
// links it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the shell family's declaration.
var Family = spec.Family{
	ID: "shell",
	Kinds: []spec.Kind{{
		Name: "shell_run",
		Doc: "Runs one local program with argv-style arguments: no shell, no PATH lookup. The command is resolved through symlinks before the policy check, " +
			"runs with an environment cleared to a fixed PATH and LANG and stdin closed, and is killed with its process group at the timeout or the run deadline.",
		Keys: []spec.Key{
			{Name: "command", Type: spec.String, Required: true, Doc: "a clean absolute path to the program"},
			{Name: "args_from", Type: spec.Path, Doc: "the arguments, an array of strings (absent: none)"},
			{Name: "timeout_secs", Type: spec.Int, Default: "30", Doc: "seconds before the program is killed"},
		},
		Limits:   []string{"stdout and stderr captured up to 64 KiB each", "timeout_secs >= 1"},
		Check:    CheckShellRun,
		Output:   "{command, args, exit_code, signal, stdout, stderr, truncated, timed_out, duration_ms}",
		Branches: []string{"error"},
		Policy:   "shell.run",
	}},
}

// CheckShellRun checks a shell_run node.
func CheckShellRun(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("command", n.Command != "")
	if n.Command != "" && !spec.CleanAbs(n.Command) {
		is.Add("invalid_shell_command", "command %q must be a clean absolute path (no PATH lookup, no shell)", n.Command)
	}
	if n.TimeoutSecs != nil && *n.TimeoutSecs < 1 {
		is.Add("out_of_range", "timeout_secs must be at least 1, got %d", *n.TimeoutSecs)
	}
	return is
}
