package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/gen/timeline"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/tape"
)

// inspectsRun reports whether `kiln inspect` was given a run file (a tape
// or run record, *.json) rather than a binary.
func inspectsRun(args []string) bool {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && strings.HasSuffix(a, ".json") {
			return true
		}
	}
	return false
}

// runInspectRun prints a run file as a timeline, or writes it as an HTML
// page (--html OUT.html).
func runInspectRun(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln inspect", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("html", "", "write the timeline as a self-contained HTML page to `file`")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln inspect RUN.json [--html OUT.html]")
		fmt.Fprintln(stderr, "Prints a recorded run (--record, --record-dir) as a timeline: node, kind, start, duration, attempt, branch, status.")
		fl.PrintDefaults()
	}
	var files []string
	for len(args) > 0 {
		if err := fl.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return cli.ExitOK
			}
			return cli.ExitUsage
		}
		if fl.NArg() == 0 {
			break
		}
		files = append(files, fl.Arg(0))
		args = fl.Args()[1:]
	}
	if len(files) != 1 {
		fl.Usage()
		return cli.ExitUsage
	}
	t, err := timeline.Load(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "kiln inspect: %s\n", runtime.Redact(err.Error()))
		return cli.ExitUsage
	}
	if *out == "" {
		timeline.Text(stdout, t)
		return cli.ExitOK
	}
	if err := writePage(*out, []timeline.Run{{Label: filepath.Base(files[0]), Tape: t}}, nil); err != nil {
		fmt.Fprintf(stderr, "kiln inspect: --html: %v\n", err)
		return cli.ExitUsage
	}
	fmt.Fprintln(stdout, *out)
	return cli.ExitOK
}

// writePage writes the timeline page of runs to path.
func writePage(path string, runs []timeline.Run, div *tape.Divergence) error {
	var b strings.Builder
	if err := timeline.HTML(&b, runs, div); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
