package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/tape"
)

// ReplayReport is what `replay --json` prints.
type ReplayReport struct {
	Same    bool            `json:"same"`
	Results []*tape.Result  `json:"results"`
	Errors  []ReplayFailure `json:"errors,omitempty"`
}

// ReplayFailure is a tape that could not be replayed (unreadable).
type ReplayFailure struct {
	Tape  string `json:"tape"`
	Error string `json:"error"`
}

// ReplayUsage is the usage text of `kiln replay` and `BIN replay`.
const ReplayUsage = `Re-executes each tape's trigger with every outside interaction (intelligence,
MCP, HTTP, shell, files, environment) answered from the tape: nothing is
sent, written or spawned. Prints where each replay first diverged.
Exit status: 0 every tape replayed the same, 5 any diverged, 2 a tape is unreadable.`

// Replay replays tapes (files, or --dir DIR for every *.json in it) on p
// and returns the exit code. `kiln replay --against WF.toml` and a sealed
// binary's `replay` both end here.
func Replay(ctx context.Context, name string, p *runtime.Program, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	asJSON := fl.Bool("json", false, "print a JSON report")
	dir := fl.String("dir", "", "replay every *.json tape in `directory`")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [--json] [--dir DIR] [TAPE...]\n%s\n", name, ReplayUsage)
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	files, err := tapeFiles(fl.Args(), *dir)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	if len(files) == 0 {
		fl.Usage()
		return ExitUsage
	}
	report := ReplayReport{Same: true, Results: []*tape.Result{}}
	for _, f := range files {
		t, err := tape.Read(f)
		if err == nil {
			var res *tape.Result
			if res, err = tape.Replay(ctx, p, t); err == nil {
				res.Tape = f
				report.Results = append(report.Results, res)
				report.Same = report.Same && res.Same
				if !*asJSON {
					fmt.Fprint(stdout, runtime.Redact(res.Text()))
				}
				continue
			}
			err = fmt.Errorf("%s: %v", f, err)
		}
		report.Same = false
		report.Errors = append(report.Errors, ReplayFailure{Tape: f, Error: err.Error()})
		fmt.Fprintf(stderr, "%s: %s\n", name, runtime.Redact(err.Error()))
	}
	if *asJSON {
		data, err := runtime.EncodeJSONIndent(report)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return ExitUsage
		}
		fmt.Fprintf(stdout, "%s\n", runtime.RedactJSON(data))
	}
	switch {
	case len(report.Errors) > 0:
		return ExitUsage
	case !report.Same:
		return ExitFailed
	}
	return ExitOK
}

// tapeFiles lists the tapes named on the command line and those in dir.
func tapeFiles(named []string, dir string) ([]string, error) {
	files := append([]string(nil), named...)
	if dir != "" {
		entries, err := readDir(dir)
		if err != nil {
			return nil, fmt.Errorf("--dir: %v", err)
		}
		var in []string
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
				in = append(in, filepath.Join(dir, e.Name()))
			}
		}
		sort.Strings(in)
		files = append(files, in...)
	}
	return files, nil
}
