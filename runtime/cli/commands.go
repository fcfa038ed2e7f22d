package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/kilnworks/kiln/runtime"
)

// familyCommand is a linked family's subcommand (runtime.Command) chosen
// on the command line.
type familyCommand struct {
	family string
	cmd    runtime.Command
}

// findCommand returns the family command whose words are exactly args,
// or nil.
func findCommand(exts []runtime.Extension, args []string) *familyCommand {
	words := strings.Join(args, " ")
	for _, ext := range exts {
		for _, c := range ext.Commands {
			if c.Name == words && c.Run != nil {
				return &familyCommand{family: ext.Name, cmd: c}
			}
		}
	}
	return nil
}

// replaces reports whether the command runs in place of ext's Setup.
func (f *familyCommand) replaces(ext runtime.Extension) bool {
	return f != nil && f.family == ext.Name
}

func (f *familyCommand) run(ctx context.Context, h *runtime.Host, o Options, fail func(int, string, ...any) int) int {
	if err := f.cmd.Run(ctx, h, o.Stdout); err != nil {
		return fail(ExitUsage, "%s: %v", f.cmd.Name, err)
	}
	return ExitOK
}

// writeFamilyCommands adds the linked families' commands to -h.
func writeFamilyCommands(w io.Writer) {
	for _, ext := range runtime.Extensions() {
		for _, c := range ext.Commands {
			fmt.Fprintf(w, "  %-9s %s\n", c.Name, c.Summary)
		}
	}
}
