package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "graph",
		summary: "draw a workflow as Mermaid, DOT or SVG",
		run:     runGraph,
	})
}

// runGraph loads and validates one workflow and draws it (docs/graph.md).
func runGraph(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "mermaid", "output format: mermaid, dot or svg")
	out := fs.String("o", "", "write to `FILE` instead of standard output")
	depth := fs.Int("depth", graph.AllLevels, "levels of workflows to draw: 1 only this one (children named, not drawn), 2 also its children, ...; 0 every level")
	signing := addSigningFlags(fs) // cmd_sign.go
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln graph [--format mermaid|dot|svg] [-o FILE] [--depth N] WORKFLOW.toml")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Draws the workflow: one box per node (id and kind, shaped by category), entry markers for")
		fmt.Fprintln(stderr, "start nodes, edges labelled with their `when`, loop edges dashed with max_iterations, child")
		fmt.Fprintln(stderr, "workflows as subgraphs, and nodes where a run can dead-end. SVG is laid out in process.")
		fmt.Fprintln(stderr, "Exit status: 0 drawn, 5 the workflow is invalid, 2 usage or a file that cannot be read.")
		fs.PrintDefaults()
	}
	paths, code, ok := parseSupplyFlags(fs, args) // flags before or after the file: cmd_sign.go
	if !ok {
		return code
	}
	if *format != "mermaid" && *format != "dot" && *format != "svg" {
		fmt.Fprintf(stderr, "kiln graph: --format must be mermaid, dot or svg, not %q\n", *format)
		return cli.ExitUsage
	}
	if *depth < 0 {
		fmt.Fprintf(stderr, "kiln graph: --depth must be at least 0 (0 draws every level), not %d\n", *depth)
		return cli.ExitUsage
	}
	if len(paths) != 1 {
		fmt.Fprintln(stderr, "kiln graph: exactly one WORKFLOW.toml is required")
		fs.Usage()
		return cli.ExitUsage
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln graph: %v\n", err)
		return cli.ExitUsage
	}
	wf, err := gen.Load(paths[0], lo)
	if err != nil {
		return failed("kiln graph", err, stderr)
	}
	g, err := graph.Build(wf, graph.Options{Depth: *depth, DeadEnds: gen.GraphDeadEnds})
	if err != nil {
		fmt.Fprintf(stderr, "kiln graph: %s: %v\n", paths[0], err)
		return cli.ExitFailed
	}
	var data []byte
	switch *format {
	case "mermaid":
		data = []byte(g.Mermaid())
	case "dot":
		data = []byte(g.DOT())
	case "svg":
		if data, err = g.SVG(); err != nil {
			fmt.Fprintf(stderr, "kiln graph: %s: %v\n", paths[0], err)
			return cli.ExitFailed
		}
	}
	if *out == "" {
		if _, err := stdout.Write(data); err != nil {
			fmt.Fprintf(stderr, "kiln graph: %v\n", err)
			return cli.ExitUsage
		}
		return cli.ExitOK
	}
	if err := writeFileAtomic(*out, data); err != nil {
		fmt.Fprintf(stderr, "kiln graph: -o %s: %v\n", *out, err)
		return cli.ExitUsage
	}
	return cli.ExitOK
}

// writeFileAtomic writes data to a new file beside path and renames it
// over path, so a reader never sees half a drawing.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this finds nothing
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
