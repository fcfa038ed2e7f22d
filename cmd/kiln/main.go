// Command kiln turns a bounded DAG workflow into a sealed, signed,
// capability-pruned Go binary, and runs workflows from TOML for development.
//
// Each subcommand lives in its own cmd_<name>.go file and registers itself
// in init with addCommand.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/kilnworks/kiln/runtime/cli"
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func addCommand(c command) {
	if _, dup := commands[c.name]; dup {
		panic("kiln: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return cli.ExitUsage
		}
		return cli.ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "kiln: unknown command %q\n\n", args[0])
		usage(stderr)
		return cli.ExitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kiln <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'kiln <command> -h' for a command's flags")
}
