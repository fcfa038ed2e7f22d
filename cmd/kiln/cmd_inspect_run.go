package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/gen/timeline"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/tape"
	"github.com/kilnworks/kiln/runtime/workflow"
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
	wfPath := fl.String("workflow", "", "--html: draw `WORKFLOW.toml`'s graph with the run's path above the timeline")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln inspect RUN.json [--html OUT.html [--workflow WORKFLOW.toml]]")
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
	var svg []byte
	if *wfPath != "" {
		wf, err := gen.Load(*wfPath, gen.LoadOptions{})
		if err != nil {
			return failed("kiln inspect", err, stderr)
		}
		if svg, err = pathGraph(wf, t); err != nil {
			fmt.Fprintf(stderr, "kiln inspect: --workflow: %v\n", err)
			return cli.ExitUsage
		}
	}
	if err := writePage(*out, []timeline.Run{{Label: filepath.Base(files[0]), Tape: t}}, nil, svg); err != nil {
		fmt.Fprintf(stderr, "kiln inspect: --html: %v\n", err)
		return cli.ExitUsage
	}
	fmt.Fprintln(stdout, *out)
	return cli.ExitOK
}

// pathGraph draws wf with the top-level path of the run t took and the
// node it failed at.
func pathGraph(wf *workflow.Workflow, t *tape.Tape) ([]byte, error) {
	p := &graph.Path{Nodes: t.Trace.Path()}
	if n := len(t.Trace.Entries); n > 0 && (t.Trace.Entries[n-1].Outcome == "error" || t.Trace.Entries[n-1].Outcome == "fail") {
		p.Failed = t.Trace.Entries[n-1].NodeID
	}
	g, err := graph.Build(wf, graph.Options{Depth: 1, Path: p, DeadEnds: gen.GraphDeadEnds})
	if err != nil {
		return nil, err
	}
	return g.SVG()
}

// writePage writes the timeline page of runs to path.
func writePage(path string, runs []timeline.Run, div *tape.Divergence, svg []byte) error {
	var b strings.Builder
	if err := timeline.HTML(&b, runs, div, svg); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
