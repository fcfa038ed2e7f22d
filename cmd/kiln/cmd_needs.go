package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/gen"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime"
)

func init() {
	addCommand(command{name: "needs", summary: "print a workflow's effective needs (secrets, oauth, capabilities, network, filesystem) as JSON", run: runNeeds})
}

// needsFiles is a repeatable --needs FILE flag.
type needsFiles []string

func (n *needsFiles) String() string     { return strings.Join(*n, ",") }
func (n *needsFiles) Set(v string) error { *n = append(*n, v); return nil }

// loadCatalogs returns kiln's built-in catalog followed by the user's.
func loadCatalogs(files []string) ([]*gneeds.Catalog, error) {
	cats := []*gneeds.Catalog{gneeds.Builtin()}
	for _, f := range files {
		c, err := gneeds.Load(f)
		if err != nil {
			return nil, err
		}
		cats = append(cats, c)
	}
	return cats, nil
}

func runNeeds(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("needs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files needsFiles
	fs.Var(&files, "needs", "needs catalog `FILE` (TOML; repeatable), merged after kiln's built-in catalog")
	signing := addSigningFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln needs [--needs FILE]... WORKFLOW.toml")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Prints the effective needs: every need of every class the workflow uses,")
		fmt.Fprintln(stderr, "merged and deduplicated, with the classes that asked (see docs/needs.md).")
		fmt.Fprintln(stderr, "Exit status: 0 ok, 2 unreadable input, 5 invalid workflow or conflicting needs.")
		fs.PrintDefaults()
	}
	// Accept flags before and after the workflow path.
	var paths []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(paths) != 1 {
		fs.Usage()
		return exitUsage
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return exitUsage
	}
	cats, err := loadCatalogs(files)
	if err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return exitUsage
	}
	wf, err := gen.Load(paths[0], lo)
	var pe *gen.ParseError
	var ve *gen.ValidationError
	switch {
	case errors.As(err, &pe):
		fmt.Fprintln(stderr, err)
		return exitUsage
	case errors.As(err, &ve):
		b, _ := runtime.EncodeJSON(ve)
		fmt.Fprintln(stderr, string(b))
		return exitFailed
	case err != nil:
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	used, err := catalog.Used(wf)
	if err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return exitFailed
	}
	eff, err := gneeds.Compute(gneeds.Input{Workflow: wf, Families: used.Families, Catalogs: cats})
	if err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return exitFailed
	}
	eff.Sort()
	out, err := runtime.EncodeJSONIndent(eff)
	if err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return exitFailed
	}
	fmt.Fprintln(stdout, string(out))
	return exitOK
}
