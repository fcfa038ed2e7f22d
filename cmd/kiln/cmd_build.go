package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "build",
		summary: "build the sealed, capability-pruned binary of a workflow",
		run:     runBuild,
	})
}

func runBuild(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln build", flag.ContinueOnError)
	fl.SetOutput(stderr)
	out := fl.String("o", "", "binary `path` to write (required)")
	kilnSrc := fl.String("kiln-source", "", "kiln source tree `dir` (default: $KILN_SOURCE, the enclosing kiln module, or the module cache at this kiln's version)")
	quiet := fl.Bool("q", false, "no progress lines, even on a terminal")
	verbose := fl.Bool("v", false, "progress lines even when stderr is not a terminal")
	allowBlocked := fl.Bool("allow-blocked", false, "build even when a mandatory need exceeds the workflow's [policy] (the binary then refuses to start, exit 6)")
	signing := addSigningFlags(fl)
	signKey := addSignKeyFlag(fl)
	planFl := addPlanFlags(fl) // --needs, --profile, --degrade: cmd_needs.go
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln build WORKFLOW.toml -o BIN [--kiln-source DIR]")
		fmt.Fprintln(stderr, "Generates the sealed program into a temporary module and runs go build -trimpath with CGO_ENABLED=0")
		fmt.Fprintln(stderr, "and no build tags (the generated imports prune). Offline builds honour GOFLAGS=-mod=mod GOPROXY=off.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "WORKFLOW.toml", *out != "", "-o BIN"); bad != "" {
		return missing("kiln build", bad, fl, stderr)
	}
	opts := gen.BuildOptions{Workflow: rest[0], Output: *out, KilnSource: *kilnSrc, AllowBlocked: *allowBlocked}
	if err := signing.apply(&opts.Load); err != nil {
		fmt.Fprintf(stderr, "kiln build: %v\n", err)
		return cli.ExitUsage
	}
	if err := signKey.apply(&opts); err != nil {
		fmt.Fprintf(stderr, "kiln build: %v\n", err)
		return cli.ExitUsage
	}
	if opts.Plan, code, ok = planFl.options("kiln build", stderr); !ok {
		return code
	}
	if *verbose || (!*quiet && isTerminal(stderr)) {
		opts.Progress = stderr
		opts.Terminal = isTerminal(stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := gen.Build(ctx, opts)
	if err != nil {
		return failed("kiln build", err, stderr)
	}
	fmt.Fprintf(stdout, "%s %s %d bytes, families %v\n", res.Binary, res.SHA256, res.Size, res.Plan.Families)
	return cli.ExitOK
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
