package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "inspect",
		summary: "show what a sealed binary contains, and check its build tags and packages against its manifest",
		run:     runInspect,
	})
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	if inspectsRun(args) { // a run file, not a binary: cmd_inspect_run.go
		return runInspectRun(args, stdout, stderr)
	}
	if inspectsDeployment(args) { // kiln package / kiln deploy output
		return runDeployCheck(args, stdout, stderr)
	}
	fl := flag.NewFlagSet("kiln inspect", flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print a JSON report")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln inspect [--json] BIN")
		fmt.Fprintln(stderr, "Reads BIN's build info and embedded manifest without running it.")
		fmt.Fprintln(stderr, "Exit status: 0 consistent, 5 the build tags, manifest or linked packages disagree, 2 not a sealed binary.")
		fl.PrintDefaults()
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if bad := requireArgs(rest, 1, "BIN", true, ""); bad != "" {
		return missing("kiln inspect", bad, fl, stderr)
	}
	in, err := gen.Inspect(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "kiln inspect: %v\n", err)
		return cli.ExitUsage
	}
	if *asJSON {
		writeInspectJSON(stdout, in)
	} else {
		writeInspectText(stdout, in)
	}
	if !in.OK() {
		for _, p := range in.Problems {
			fmt.Fprintf(stderr, "kiln inspect: %s: %s\n", rest[0], p)
		}
		return cli.ExitFailed
	}
	return cli.ExitOK
}

func writeInspectText(w io.Writer, in *gen.Inspection) {
	m := in.Manifest
	fmt.Fprintf(w, "binary     %s (%d bytes)\n", in.Path, in.Size)
	fmt.Fprintf(w, "workflow   %s (sha256 %s)\n", m.Workflow.Name, m.Workflow.Digest)
	fmt.Fprintf(w, "kiln       %s\n", m.KilnVersion)
	fmt.Fprintf(w, "go         %s\n", in.BuildInfo.GoVersion)
	if len(in.Tags) == 0 { // kiln build and a plain go build: the imports prune
		fmt.Fprintf(w, "tags       none\n")
		fmt.Fprintf(w, "families   %s (manifest), %s (linked)\n", strings.Join(m.FamilyIDs(), ","), strings.Join(in.LinkedFamilies, ","))
	} else {
		fmt.Fprintf(w, "tags       %s\n", strings.Join(in.Tags, ","))
		fmt.Fprintf(w, "families   %s (manifest), %s (build tags), %s (linked)\n",
			strings.Join(m.FamilyIDs(), ","), strings.Join(in.TagFamilies, ","), strings.Join(in.LinkedFamilies, ","))
	}
	fmt.Fprintf(w, "node kinds %s\n", strings.Join(m.NodeKinds, ","))
	if len(m.Degraded) > 0 { // a --degrade build: what it deliberately lacks
		fmt.Fprintf(w, "degraded   %s\n", strings.Join(m.Degraded, ","))
	}
	fmt.Fprintln(w, "modules")
	fmt.Fprintf(w, "  %s %s (main)\n", in.BuildInfo.Main.Path, in.BuildInfo.Main.Version)
	for _, d := range in.BuildInfo.Deps {
		line := fmt.Sprintf("  %s %s", d.Path, d.Version)
		if d.Replace != nil {
			line += fmt.Sprintf(" => %s %s", d.Replace.Path, d.Replace.Version)
		}
		fmt.Fprintln(w, line)
	}
	if in.OK() {
		fmt.Fprintln(w, "ok         build tags, manifest and linked packages agree")
	}
	for _, p := range in.Problems {
		fmt.Fprintf(w, "PROBLEM    %s\n", p)
	}
}

func writeInspectJSON(w io.Writer, in *gen.Inspection) {
	type module struct {
		Path    string `json:"path"`
		Version string `json:"version"`
		Replace string `json:"replace,omitempty"`
	}
	rep := struct {
		Binary         string          `json:"binary"`
		Size           int64           `json:"size"`
		GoVersion      string          `json:"go_version"`
		Tags           []string        `json:"build_tags"`
		TagFamilies    []string        `json:"tag_families"`
		LinkedFamilies []string        `json:"linked_families"`
		Packages       []string        `json:"kiln_packages"`
		Modules        []module        `json:"modules"`
		Manifest       json.RawMessage `json:"manifest"`
		OK             bool            `json:"ok"`
		Problems       []string        `json:"problems"`
	}{
		Binary: in.Path, Size: in.Size, GoVersion: in.BuildInfo.GoVersion, Tags: in.Tags,
		TagFamilies: in.TagFamilies, LinkedFamilies: in.LinkedFamilies, Packages: in.Packages,
		Manifest: in.ManifestJSON, OK: in.OK(), Problems: in.Problems,
	}
	for _, d := range in.BuildInfo.Deps {
		mod := module{Path: d.Path, Version: d.Version}
		if d.Replace != nil {
			mod.Replace = d.Replace.Path
		}
		rep.Modules = append(rep.Modules, mod)
	}
	if rep.Problems == nil {
		rep.Problems = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
}

// inspectsDeployment reports whether kiln inspect was given what kiln
// package or kiln deploy wrote (a directory, a manifest or unit file), so
// it names the binary's manifest each was generated from.
func inspectsDeployment(args []string) bool {
	if len(args) == 0 || len(args) > 2 {
		return false
	}
	switch filepath.Ext(args[0]) {
	case ".yaml", ".yml", ".service", ".timer":
		return true
	}
	st, err := os.Stat(args[0])
	return err == nil && st.IsDir()
}
