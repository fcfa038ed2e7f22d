package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/kilnworks/kiln/gen"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

// failed reports err, a failure to load, plan or build a workflow, on
// stderr and returns its exit code: the one mapping every command shares.
//
//   - a parse error (an unreadable or unparsable file, a bad signing key):
//     file:line: message, ExitUsage;
//   - an invalid workflow: the validation report JSON (the shape and key
//     order of `kiln check`), ExitFailed;
//   - a profile refusing a needed family: the JSON error envelope,
//     ExitFailed;
//   - a refused signature, conflicting needs, needs beyond the workflow's
//     policy (kiln build without --allow-blocked), a failed go build:
//     "prog: message", ExitFailed;
//   - anything else comes from the environment or the configuration (the
//     kiln source tree, the output path): "prog: message", ExitUsage.
func failed(prog string, err error, stderr io.Writer) int {
	var (
		pe       *gen.ParseError
		ve       *gen.ValidationError
		capErr   *gen.CapabilityError
		se       *gen.SignatureError
		conflict *gneeds.ConflictError
		be       *gen.BuildError
		blocked  *gen.BlockedError
	)
	switch {
	case errors.As(err, &pe):
		fmt.Fprintln(stderr, err)
		return cli.ExitUsage
	case errors.As(err, &ve):
		issues := ve.Issues
		if issues == nil {
			issues = []gen.Issue{}
		}
		printJSON(prog, err, struct {
			Workflow string      `json:"workflow"`
			OK       bool        `json:"ok"`
			Issues   []gen.Issue `json:"issues"`
		}{ve.Workflow, false, issues}, stderr)
		return cli.ExitFailed
	case errors.As(err, &capErr):
		printJSON(prog, err, capErr.Envelope(), stderr)
		return cli.ExitFailed
	case errors.As(err, &se), errors.As(err, &conflict), errors.As(err, &be), errors.As(err, &blocked):
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return cli.ExitFailed
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	return cli.ExitUsage
}

// printJSON prints v as one line of JSON, or err's message when v does not
// encode.
func printJSON(prog string, err error, v any, stderr io.Writer) {
	b, jerr := runtime.EncodeJSON(v)
	if jerr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return
	}
	fmt.Fprintf(stderr, "%s\n", b)
}
