package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	_ "github.com/kilnworks/kiln/capabilities/all" // every family: kiln run/test link everything
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "run",
		summary: "run a workflow from its TOML: once (outcome JSON on stdout) or serve its routes and triggers",
		run:     runRun,
	})
}

const runUsage = `usage: kiln run WORKFLOW.toml [flags]
       kiln run --config WORKFLOW.toml [flags]

Loads and validates the workflow, then runs it once with a manual trigger
(--input FILE or - for stdin, JSON) and prints the outcome JSON, or serves
it when it declares http routes or long-lived triggers (--mode once|serve).
Every flag NAME also reads the environment variable KILN_NAME.

Before anything runs, the workflow's effective needs (kiln's built-in
catalog plus --needs FILE catalogs) are checked; 'kiln run WORKFLOW.toml
needs' prints that preflight report.

Exit status: 0 completed, 2 usage or configuration error, 5 failed, timed
out, errored or invalid workflow, 6 a mandatory need is unmet, 7 paused.
Run 'kiln run WORKFLOW.toml -h' for every flag.`

// runRun loads the workflow, then hands over to the run CLI that sealed
// binaries share.
func runRun(args []string, stdout, stderr io.Writer) int {
	args, signing, err := splitSigningArgs(args) // --signing-*: cmd_sign.go
	if err != nil {
		fmt.Fprintf(stderr, "kiln run: %v\n\n%s\n", err, runUsage)
		return cli.ExitUsage
	}
	args, needsCatalogs, err := splitNeedsArgs(args) // --needs FILE: cmd_needs.go
	if err != nil {
		fmt.Fprintf(stderr, "kiln run: %v\n\n%s\n", err, runUsage)
		return cli.ExitUsage
	}
	path, rest, err := workflowArg(args)
	if err != nil {
		fmt.Fprintf(stderr, "kiln run: %v\n\n%s\n", err, runUsage)
		return cli.ExitUsage
	}
	if path == "" {
		fmt.Fprintln(stderr, runUsage)
		return cli.ExitOK
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln run: %v\n", err)
		return cli.ExitUsage
	}
	wf, err := gen.Load(path, lo)
	if err != nil {
		return failed("kiln run", err, stderr)
	}
	build, code, ok := runBuildInfo(wf, needsCatalogs, stderr) // effective needs for preflight
	if !ok {
		return code
	}
	var version string
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	return cli.Main(rest, cli.Options{Prog: "kiln", Workflow: wf, Stdout: stdout, Stderr: stderr, Build: build,
		ModuleVersion: version, Usage: "usage: kiln run " + path + " [flags] [once|serve]"})
}

// workflowArg takes the workflow path from the first argument or from
// --config anywhere; the rest are run flags. An empty path asks for help.
func workflowArg(args []string) (path string, rest []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "config" {
			if !hasValue {
				if i+1 >= len(args) {
					return "", nil, fmt.Errorf("--config needs a workflow file")
				}
				i++
				value = args[i]
			}
			if path != "" {
				return "", nil, fmt.Errorf("two workflows given (%s and %s)", path, value)
			}
			path = value
			continue
		}
		rest = append(rest, a)
	}
	if path == "" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		path, rest = rest[0], rest[1:]
	}
	if path == "" {
		for _, a := range rest {
			if a == "-h" || a == "--help" || a == "-help" {
				return "", nil, nil
			}
		}
		return "", nil, fmt.Errorf("no workflow file given")
	}
	return path, rest, nil
}
