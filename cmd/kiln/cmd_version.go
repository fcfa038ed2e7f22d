package main

import (
	"flag"
	"fmt"
	"io"
	goruntime "runtime"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/manifest"
)

func init() {
	addCommand(command{
		name:    "version",
		summary: "print kiln's version (also kiln --version)",
		run:     runVersion,
	})
}

// runVersion prints "kiln VERSION [h1:SUM] GOVERSION OS/ARCH", as `go
// version` does: the module version and sum come from this binary's build
// info (a kiln from the module cache); a source build says devel.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("kiln version", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: kiln version")
		fmt.Fprintln(stderr, "Prints kiln's module version (and its go.sum h1: hash when kiln came from the module cache), the Go version and the platform.")
	}
	rest, code, ok := parseSupplyFlags(fl, args)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		return missing("kiln version", "unexpected argument "+rest[0], fl, stderr)
	}
	line := "kiln " + manifest.KilnVersion()
	if m := manifest.KilnModuleInfo(); m != nil && m.Replace == nil && m.Sum != "" {
		line += " " + m.Sum
	}
	fmt.Fprintf(stdout, "%s %s %s/%s\n", line, goruntime.Version(), goruntime.GOOS, goruntime.GOARCH)
	return cli.ExitOK
}
