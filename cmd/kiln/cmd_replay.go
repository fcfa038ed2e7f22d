package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/timeline"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/tape"
)

func init() {
	addCommand(command{
		name:    "replay",
		summary: "re-run recorded tapes against a workflow or sealed binary, answering every outside request from the tape",
		run:     runReplay,
	})
}

const replayUsage = `usage: kiln replay TAPE... --against WORKFLOW.toml|BIN [--json] [--dir DIR]
       kiln replay TAPE --against WORKFLOW.toml --html OUT.html

` + cli.ReplayUsage + `
Against a sealed binary, the binary replays the tapes itself (BIN replay).
--html writes the recorded and the replayed run side by side as a timeline
page, the divergence marked.`

func runReplay(args []string, stdout, stderr io.Writer) int {
	against, page, flags, tapes, err := replayArgs(args)
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
	if page != "" && (len(tapes) != 1 || len(flags) > 0 || !strings.HasSuffix(against, ".toml")) {
		fmt.Fprintf(stderr, "kiln replay: --html takes one TAPE, --against WORKFLOW.toml and no other flag\n")
		return cli.ExitUsage
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
	if page != "" {
		return replayPage(prog, tapes[0], page, stdout, stderr)
	}
	return cli.Replay(context.Background(), "kiln replay", prog, rest, stdout, stderr)
}

// replayPage replays one tape and writes both runs as a timeline page.
func replayPage(prog *runtime.Program, file, page string, stdout, stderr io.Writer) int {
	old, err := tape.Read(file)
	if err != nil {
		fmt.Fprintf(stderr, "kiln replay: %s\n", runtime.Redact(err.Error()))
		return cli.ExitUsage
	}
	res, err := tape.Replay(context.Background(), prog, old)
	if err != nil {
		fmt.Fprintf(stderr, "kiln replay: %s: %s\n", file, runtime.Redact(err.Error()))
		return cli.ExitUsage
	}
	res.Tape = file
	fmt.Fprint(stdout, runtime.Redact(res.Text()))
	runs := []timeline.Run{{Label: "recorded", Tape: old}, {Label: "replayed", Tape: res.Replayed}}
	svg, err := pathGraph(prog.Workflow, res.Replayed) // the replayed workflow, its path
	if err != nil {
		fmt.Fprintf(stderr, "kiln replay: --html: %v\n", err)
		return cli.ExitUsage
	}
	if err := writePage(page, runs, res.Divergence, svg); err != nil {
		fmt.Fprintf(stderr, "kiln replay: --html: %v\n", err)
		return cli.ExitUsage
	}
	if !res.Same {
		return cli.ExitFailed
	}
	return cli.ExitOK
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
func replayArgs(args []string) (against, page string, flags, tapes []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" {
			tapes = append(tapes, a)
			continue
		}
		switch name {
		case "against", "dir", "html":
			if !hasValue {
				if i+1 >= len(args) {
					return "", "", nil, nil, fmt.Errorf("%s needs a value", a)
				}
				i++
				value = args[i]
			}
			switch name {
			case "against":
				against = value
			case "html":
				page = value
			default:
				flags = append(flags, "--dir", value)
			}
		default:
			flags = append(flags, a) // --json, -h: the replay's own flags judge them
		}
	}
	return against, page, flags, tapes, nil
}
