package main

// The `kiln test` command lives here, not in cmd_test.go: go build ignores
// files named *_test.go.

import (
	"flag"
	"fmt"
	"io"

	_ "github.com/kilnworks/kiln/capabilities/all" // fixtures may use any family
	"github.com/kilnworks/kiln/gen/fixture"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "test",
		summary: "run fixture tests (workflow.toml + fixture.toml directories)",
		run:     runTest,
	})
}

// testReport is the --json output.
type testReport struct {
	Passed   int               `json:"passed"`
	Failed   int               `json:"failed"`
	Fixtures []*fixture.Result `json:"fixtures"`
}

// runTest runs every fixture under the given paths, one line each, then
// "N passed, M failed"; exit 1 when any failed.
func runTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a machine-readable JSON report instead of lines")
	verbose := fs.Bool("v", false, "write each fixture's audit log (debug level) to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln test [--json] [-v] PATH...")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "A PATH is a fixture directory (workflow.toml + fixture.toml) or a folder")
		fmt.Fprintln(stderr, "searched recursively for them. Exit status: 0 all passed, 1 a fixture")
		fmt.Fprintln(stderr, "failed, 2 usage error or no fixtures found.")
		fs.PrintDefaults()
	}
	paths, err := parseInterleaved(fs, args)
	if err != nil {
		if err == flag.ErrHelp {
			return cli.ExitOK
		}
		return cli.ExitUsage
	}
	if len(paths) == 0 {
		fs.Usage()
		return cli.ExitUsage
	}
	fixtures, err := fixture.Discover(paths...)
	if err != nil {
		fmt.Fprintf(stderr, "kiln test: %v\n", err)
		return cli.ExitUsage
	}
	var opts fixture.Options
	if *verbose {
		// The audit logger every run uses: registered secrets are redacted.
		audit, closer, err := runtime.NewAuditLogger(runtime.AuditOptions{Level: "debug", Stderr: stderr})
		if err != nil {
			fmt.Fprintf(stderr, "kiln test: %v\n", err)
			return cli.ExitUsage
		}
		defer closer.Close()
		opts.Audit = audit
	}
	rep := testReport{Fixtures: []*fixture.Result{}}
	for _, f := range fixtures {
		if *verbose {
			fmt.Fprintf(stderr, "--- %s\n", f.Name)
		}
		res := fixture.Run(f, opts)
		rep.Fixtures = append(rep.Fixtures, res)
		if res.Pass {
			rep.Passed++
		} else {
			rep.Failed++
		}
		if !*asJSON {
			if res.Pass {
				fmt.Fprintf(stdout, "PASS %s\n", res.Name)
			} else {
				fmt.Fprintf(stdout, "FAIL %s: %s\n", res.Name, res.Why())
			}
		}
	}
	if *asJSON {
		data, err := runtime.EncodeJSONIndent(rep)
		if err != nil {
			fmt.Fprintf(stderr, "kiln test: %v\n", err)
			return cli.ExitUsage
		}
		fmt.Fprintf(stdout, "%s\n", runtime.RedactJSON(data))
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed\n", rep.Passed, rep.Failed)
	}
	if rep.Failed > 0 {
		return cli.ExitTestFail
	}
	return cli.ExitOK
}

// parseInterleaved parses flags given before, between or after the
// positional arguments, which it returns.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
