package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

func init() {
	addCommand(command{
		name:    "replay",
		summary: "re-run recorded tapes against a workflow or sealed binary, answering every outside request from the tape",
		run:     runReplay,
	})
}

const replayUsage = `usage: kiln replay TAPE... --against WORKFLOW.toml|BIN [--json] [--dir DIR]

` + cli.ReplayUsage + `
Against a sealed binary, the binary replays the tapes itself (BIN replay).`

func runReplay(args []string, stdout, stderr io.Writer) int {
	against, flags, tapes, err := replayArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "kiln replay: %v\n\n%s\n", err, replayUsage)
		return cli.ExitUsage
	}
	if against == "" {
		fmt.Fprintf(stderr, "%s\n", replayUsage)
		return cli.ExitUsage
	}
	rest := append(flags, tapes...)
	if !strings.HasSuffix(against, ".toml") {
		return replayBinary(against, rest, stdout, stderr)
	}
	wf, err := gen.Load(against, gen.LoadOptions{})
	if err != nil {
		return failed("kiln replay", err, stderr)
	}
	prog, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "kiln replay: %s: %v\n", against, err)
		return cli.ExitUsage
	}
	return cli.Replay(context.Background(), "kiln replay", prog, rest, stdout, stderr)
}

// replayBinary hands the tapes to a sealed binary's own replay.
func replayBinary(bin string, args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(bin, append([]string{"replay"}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return cli.ExitOK
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "kiln replay: %s: %v\n", bin, err)
	return cli.ExitUsage
}

// replayArgs takes --against from anywhere and puts the replay flags
// before the tapes, so flags may follow tape names.
func replayArgs(args []string) (against string, flags, tapes []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" {
			tapes = append(tapes, a)
			continue
		}
		switch name {
		case "against", "dir":
			if !hasValue {
				if i+1 >= len(args) {
					return "", nil, nil, fmt.Errorf("%s needs a value", a)
				}
				i++
				value = args[i]
			}
			if name == "against" {
				against = value
			} else {
				flags = append(flags, "--dir", value)
			}
		default:
			flags = append(flags, a) // --json, -h: the replay's own flags judge them
		}
	}
	return against, flags, tapes, nil
}
