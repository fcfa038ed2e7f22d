// Command kiln turns a bounded DAG workflow into a sealed, signed,
// capability-pruned Go binary, and runs workflows from TOML for development.
//
// Each subcommand lives in its own cmd_<name>.go file and registers itself
// in init with addCommand.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/gen"
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
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return cli.ExitOK
	case "help":
		return help(args[1:], stdout, stderr)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
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
	fmt.Fprintln(w, "run 'kiln help <command>' (or 'kiln <command> -h') for a command's flags")
}

// help is `kiln help [CMD]`: the command's own -h text, on stdout, as
// `go help build` prints.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return cli.ExitOK
	}
	c, ok := commands[args[0]]
	if !ok || len(args) > 1 {
		fmt.Fprintf(stderr, "kiln help: unknown command %q; run 'kiln help' for the list\n", strings.Join(args, " "))
		return cli.ExitUsage
	}
	return c.run([]string{"-h"}, stdout, stdout)
}

// requireArgs checks a command's positional arguments (want of them, or
// at least one when want < 0) and one required flag; it names what is
// missing ("" when nothing is), as Go tools do.
func requireArgs(args []string, want int, argName string, flagSet bool, flagName string) string {
	switch {
	case len(args) == 0:
		return argName + " is required"
	case want >= 0 && len(args) > want:
		return fmt.Sprintf("unexpected argument %s (takes one %s)", gen.ShellQuote(args[want]), argName)
	case !flagSet:
		return flagName + " is required"
	}
	return ""
}

// missing reports a missing or extra argument (`kiln build: -o BIN is
// required`), then the command's usage, and returns ExitUsage.
func missing(prog, what string, fl *flag.FlagSet, stderr io.Writer) int {
	fmt.Fprintf(stderr, "%s: %s\n", prog, what)
	fl.Usage()
	return cli.ExitUsage
}
