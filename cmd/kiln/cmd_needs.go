package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/gen"
	gneeds "github.com/kilnworks/kiln/gen/needs"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func init() {
	addCommand(command{name: "needs", summary: "print a workflow's effective needs (secrets, oauth, capabilities, network, filesystem) as JSON", run: runNeeds})
}

// needsFiles is the repeatable --needs FILE flag of check, gen, build, run
// and needs.
type needsFiles []string

func (n *needsFiles) String() string     { return strings.Join(*n, ",") }
func (n *needsFiles) Set(v string) error { *n = append(*n, v); return nil }

const needsUsage = "needs catalog `FILE` (TOML; repeatable), merged after kiln's built-in catalog"

// addNeedsFlag registers --needs on a command's flag set.
func addNeedsFlag(fs *flag.FlagSet) *needsFiles {
	var n needsFiles
	fs.Var(&n, "needs", needsUsage)
	return &n
}

// catalogs loads the --needs files strictly, in order. kiln's built-in
// catalog is not among them: gen.NewPlan always merges it first.
func (n *needsFiles) catalogs() ([]*gneeds.Catalog, error) {
	var out []*gneeds.Catalog
	for _, f := range *n {
		c, err := gneeds.Load(f)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// loadCatalogs reports a bad catalog the way every command does: the
// message names the file (and line), exit 2. ok is false on failure.
func loadCatalogs(prog string, n *needsFiles, stderr io.Writer) (cats []*gneeds.Catalog, code int, ok bool) {
	cats, err := n.catalogs()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, cli.ExitUsage, false
	}
	return cats, cli.ExitOK, true
}

// splitNeedsArgs takes --needs FILE / --needs=FILE out of kiln run's
// arguments (the rest go to the run CLI, which has no such flag).
func splitNeedsArgs(args []string) (rest []string, files needsFiles, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i:]...), files, nil
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "needs" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("--needs needs a catalog file")
			}
			i++
			value = args[i]
		}
		files = append(files, value)
	}
	return rest, files, nil
}

func runNeeds(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("needs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	files := addNeedsFlag(fs)
	signing := addSigningFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln needs [--needs FILE]... WORKFLOW.toml")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Prints the effective needs: every need of every class the workflow uses,")
		fmt.Fprintln(stderr, "merged and deduplicated, with the classes that asked (see docs/needs.md).")
		fmt.Fprintln(stderr, "Exit status: 0 ok, 2 unreadable input or catalog, 5 invalid workflow or conflicting needs.")
		fs.PrintDefaults()
	}
	paths, code, ok := parseSupplyFlags(fs, args) // flags before and after the path
	if !ok {
		return code
	}
	if len(paths) != 1 {
		fs.Usage()
		return cli.ExitUsage
	}
	var lo gen.LoadOptions
	if err := signing.apply(&lo); err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return cli.ExitUsage
	}
	cats, code, ok := loadCatalogs("kiln needs", files, stderr)
	if !ok {
		return code
	}
	wf, err := gen.Load(paths[0], lo)
	if err != nil {
		return failed("kiln needs", err, stderr)
	}
	// The same plan the generator uses, so `kiln needs` prints exactly
	// what a sealed binary of this workflow embeds.
	plan, err := gen.NewPlan(wf, gen.PlanOptions{Catalogs: cats})
	if err != nil {
		return failed("kiln needs", err, stderr)
	}
	out, err := runtime.EncodeJSONIndent(plan.Needs)
	if err != nil {
		fmt.Fprintf(stderr, "kiln needs: %v\n", err)
		return cli.ExitFailed
	}
	fmt.Fprintln(stdout, string(out))
	return cli.ExitOK
}

// planFlags are --needs, --profile and --degrade of kiln gen and build.
type planFlags struct {
	needs   *needsFiles
	profile string
	degrade bool
}

func addPlanFlags(fs *flag.FlagSet) *planFlags {
	p := &planFlags{needs: addNeedsFlag(fs)}
	fs.StringVar(&p.profile, "profile", "", "target profile `file` (TOML: allow = [families] or deny = [families]); a workflow needing a forbidden family is refused")
	fs.BoolVar(&p.degrade, "degrade", false, "with --profile: build without forbidden families instead of refusing; their keys are listed in degraded[] and their nodes fail with capability_not_provided")
	return p
}

// options loads the catalogs and the profile (a bad file is exit 2, named).
func (p *planFlags) options(prog string, stderr io.Writer) (po gen.PlanOptions, code int, ok bool) {
	if p.degrade && p.profile == "" {
		fmt.Fprintf(stderr, "%s: --degrade needs --profile\n", prog)
		return po, cli.ExitUsage, false
	}
	if po.Catalogs, code, ok = loadCatalogs(prog, p.needs, stderr); !ok {
		return po, code, false
	}
	if p.profile != "" {
		prof, err := gen.LoadProfile(p.profile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return po, cli.ExitUsage, false
		}
		po.Profile, po.Degrade = prof, p.degrade
	}
	return po, cli.ExitOK, true
}

// runBuildInfo is what `kiln run` tells the run CLI about itself: the
// workflow's effective needs, computed from the TOML now exactly as the
// generator would embed them, and every capability family (kiln links
// them all).
func runBuildInfo(wf *workflow.Workflow, files needsFiles, stderr io.Writer) (b *cli.Build, code int, ok bool) {
	cats, code, ok := loadCatalogs("kiln run", &files, stderr)
	if !ok {
		return nil, code, false
	}
	plan, err := gen.NewPlan(wf, gen.PlanOptions{Catalogs: cats})
	if err != nil {
		return nil, failed("kiln run", err, stderr), false
	}
	return &cli.Build{Needs: plan.Needs, Families: catalog.FamilyKeys(catalog.IDs()), Degraded: plan.Degraded}, cli.ExitOK, true
}
