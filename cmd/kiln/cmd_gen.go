package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kilnworks/kiln/gen"
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
	if len(rest) != 1 || *out == "" {
		fl.Usage()
		return exitUsage
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return exitUsage
	}
	wf, err := gen.Load(rest[0], lo)
	if err != nil {
		return loadFailure("kiln gen", err, stderr)
	}
	po, code, ok := planFl.options("kiln gen", stderr)
	if !ok {
		return code
	}
	plan, err := gen.NewPlan(wf, po)
	if err != nil {
		return planFailure("kiln gen", err, stderr)
	}
	output, err := gen.Emit(plan, gen.EmitOptions{Package: *pkg})
	if err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return exitUsage
	}
	if *mod != "" {
		src, err := gen.FindKilnSource(*kilnSrc)
		if err != nil {
			fmt.Fprintf(stderr, "kiln gen: %v\n", err)
			return exitUsage
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
			return exitUsage
		}
		output.Files["go.mod"], output.Files["go.sum"] = gomod, gosum
	}
	if err := gen.WriteOutput(*out, output); err != nil {
		fmt.Fprintf(stderr, "kiln gen: %v\n", err)
		return exitUsage
	}
	if *verbose {
		for _, id := range plan.Families {
			fmt.Fprintf(stderr, "%-10s %v\n", id, plan.Usage.Why[id])
		}
	}
	fmt.Fprintf(stdout, "generated %s: workflow %s, families %v, %d files\n", *out, wf.Name, plan.Families, len(output.Files))
	return exitOK
}

// loadFailure reports an error of gen.Load the way every generator
// command does: a parse error as file:line on stderr (exit 2), a
// validation error as the JSON report on stderr (exit 5), anything else
// (a refused signature) as a message (exit 5).
func loadFailure(prog string, err error, stderr io.Writer) int {
	var pe *gen.ParseError
	var ve *gen.ValidationError
	switch {
	case errors.As(err, &pe):
		fmt.Fprintln(stderr, err)
		return exitUsage
	case errors.As(err, &ve):
		rep := struct {
			Workflow string      `json:"workflow"`
			OK       bool        `json:"ok"`
			Issues   []gen.Issue `json:"issues"`
		}{ve.Workflow, false, ve.Issues}
		enc := json.NewEncoder(stderr)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(rep)
		return exitFailed
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	return exitFailed
}
