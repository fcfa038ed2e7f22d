package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "gen",
		summary: "generate the sealed Go program of a workflow (static tables, pruned capabilities)",
		run:     runGen,
	})
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln gen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "output `directory` (required)")
	pkg := fl.String("package", "main", "Go package `name` of the generated code")
	mod := fl.String("module", "", "also write go.mod and go.sum: the output directory becomes a standalone module with this `path`")
	kilnSrc := fl.String("kiln-source", "", "kiln source tree `dir` for --module's replace line (default: $KILN_SOURCE, the enclosing kiln module, or the module cache)")
	verbose := fl.Bool("v", false, "print why each capability family is linked")
	signing := addSigningFlags(fl)
	planFl := addPlanFlags(fl) // --needs, --profile, --degrade: cmd_needs.go
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln gen WORKFLOW.toml -o DIR [--package main] [--module PATH]")
		fmt.Fprintln(stderr, "Writes main.go, workflow_gen.go, capabilities_gen.go, manifest_gen.go, needs_gen.go, manifest.json and embed/ into DIR.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "WORKFLOW.toml", *out != "", "-o DIR"); bad != "" {
		return missing("kiln gen", bad, fl, stderr)
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return cli.ExitUsage
	}
	wf, err := gen.Load(rest[0], lo)
	if err != nil {
		return failed("kiln gen", err, stderr)
	}
	po, code, ok := planFl.options("kiln gen", stderr)
	if !ok {
		return code
	}
	plan, err := gen.NewPlan(wf, po)
	if err != nil {
		return failed("kiln gen", err, stderr)
	}
	if po.KilnVersion == "" {
		// Name the generating kiln by its source (version and h1: sum),
		// as kiln build does, not by how this binary was built.
		plan.Manifest.KilnVersion, plan.Manifest.KilnSum = gen.GeneratorIdentity(*kilnSrc)
	}
	output, err := gen.Emit(plan, gen.EmitOptions{Package: *pkg})
	if err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return cli.ExitUsage
	}
	if *mod != "" {
		src, err := gen.FindKilnSource(*kilnSrc)
		if err != nil {
			fmt.Fprintf(stderr, "kiln gen: %v\n", err)
			return cli.ExitUsage
		}
		replace := src.Dir
		if abs, err := filepath.Abs(*out); err == nil {
			if rel, err := filepath.Rel(abs, src.Dir); err == nil {
				replace = filepath.ToSlash(rel)
			}
		}
		gomod, gosum, err := gen.ModuleFiles(plan, *mod, src, replace)
		if err != nil {
			fmt.Fprintf(stderr, "kiln gen: %v\n", err)
			return cli.ExitUsage
		}
		output.Files["go.mod"], output.Files["go.sum"] = gomod, gosum
	}
	if err := gen.WriteOutput(*out, output); err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return cli.ExitUsage
	}
	if *verbose {
		for _, id := range plan.Families {
			fmt.Fprintf(stderr, "%-10s %v\n", id, plan.Usage.Why[id])
		}
	}
	fmt.Fprintf(stdout, "generated %s: workflow %s, families %v, %d files\n", *out, wf.Name, plan.Families, len(output.Files))
	return cli.ExitOK
}
