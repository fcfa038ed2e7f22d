package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/kilnworks/kiln/gen"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "check",
		summary: "load and validate workflows; print a report per file",
		run:     runCheck,
	})
}

// checkReport is one file's result: the validation report (its issue codes
// are listed in docs/validation-codes.md).
type checkReport struct {
	Workflow string      `json:"workflow"`
	OK       bool        `json:"ok"`
	Issues   []gen.Issue `json:"issues,omitempty"`
	// Warnings are lint findings (gen.Lint): valid, but probably not
	// meant; --strict turns them into issues.
	Warnings []gen.Warning `json:"warnings,omitempty"`
}

// runCheck checks every file and exits with the worst result: a file that
// cannot be read or parsed (2) outranks an invalid one (5), which outranks
// a valid one (0).
func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "json", "output format: json (one report per line) or text")
	strict := fs.Bool("strict", false, "treat lint warnings as issues (exit 5), as CI should")
	signing := addSigningFlags(fs) // cmd_sign.go
	needsFlag := addNeedsFlag(fs)  // cmd_needs.go
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln check [--format json|text] [--strict] [--needs FILE]... WORKFLOW.toml...")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Lint warnings are listed beside issues and do not fail the check unless --strict.")
		fmt.Fprintln(stderr, "Exit status: 0 all valid, 5 a workflow is invalid, 2 a file cannot be read or parsed.")
		fs.PrintDefaults()
	}
	paths, code, ok := parseSupplyFlags(fs, args) // flags before or after the files: cmd_sign.go
	if !ok {
		return code
	}
	if *format != "json" && *format != "text" {
		fmt.Fprintf(stderr, "kiln check: --format must be json or text, not %q\n", *format)
		return cli.ExitUsage
	}
	if bad := requireArgs(paths, -1, "WORKFLOW.toml", true, ""); bad != "" {
		return missing("kiln check", bad, fs, stderr)
	}
	cats, code, ok := loadCatalogs("kiln check", needsFlag, stderr)
	if !ok {
		return code
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln check: %v\n", err)
		return cli.ExitUsage
	}
	worst := cli.ExitOK
	for _, path := range paths {
		code := checkOne(path, *format, *strict, lo, cats, stdout, stderr)
		if severity(code) > severity(worst) {
			worst = code
		}
	}
	return worst
}

// severity ranks exit codes for the worst of several files (a rank, not an
// exit code): ok, then an invalid workflow, then anything else.
func severity(code int) int {
	switch code {
	case cli.ExitOK:
		return 0
	case cli.ExitFailed:
		return 1
	}
	return 2
}

func checkOne(path, format string, strict bool, lo gen.LoadOptions, cats []*gneeds.Catalog, stdout, stderr io.Writer) int {
	wf, err := gen.Load(path, lo)
	var (
		rep checkReport
		ve  *gen.ValidationError
	)
	switch {
	case err == nil:
		rep = checkReport{Workflow: wf.Name, OK: true}
		// Conflicting needs (or an unusable capability) fail closed here too.
		if _, perr := gen.NewPlan(wf, gen.PlanOptions{Catalogs: cats}); perr != nil {
			code := "plan_failed"
			var ce *gneeds.ConflictError
			if errors.As(perr, &ce) {
				code = "needs_conflict"
			}
			rep = checkReport{Workflow: wf.Name, Issues: []gen.Issue{{Code: code, Message: perr.Error()}}}
		}
		rep.Warnings = gen.Lint(wf)
		if strict && len(rep.Warnings) > 0 {
			for _, w := range rep.Warnings {
				rep.Issues = append(rep.Issues, gen.Issue{Code: w.Code, Message: w.Message})
			}
			rep.OK, rep.Warnings = false, nil
		}
	case errors.As(err, &ve):
		rep = checkReport{Workflow: ve.Workflow, Issues: ve.Issues}
		if rep.Workflow == "" {
			rep.Workflow = path
		}
	default:
		// Unreadable, unparsable or a refused signature.
		return failed("kiln check", err, stderr)
	}
	if format == "text" {
		writeTextReport(stdout, path, rep)
	} else {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "kiln check: %v\n", err)
			return cli.ExitUsage
		}
	}
	if !rep.OK {
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func writeTextReport(w io.Writer, path string, rep checkReport) {
	if rep.OK {
		fmt.Fprintf(w, "%s: ok (workflow %q)\n", path, rep.Workflow)
		writeTextWarnings(w, rep.Warnings)
		return
	}
	noun := "issues"
	if len(rep.Issues) == 1 {
		noun = "issue"
	}
	fmt.Fprintf(w, "%s: %d %s (workflow %q)\n", path, len(rep.Issues), noun, rep.Workflow)
	for _, is := range rep.Issues {
		fmt.Fprintf(w, "  %-28s %s\n", is.Code, is.Message)
	}
}

func writeTextWarnings(w io.Writer, warnings []gen.Warning) {
	for _, x := range warnings {
		fmt.Fprintf(w, "  warning %-28s %s\n", x.Code, x.Message)
	}
}
