package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// TestUsageListsCommandsAligned: every command's summary starts in the
// same column, however long the longest name (sign-workflow).
func TestUsageListsCommandsAligned(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-h"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("kiln -h: exit %d", code)
	}
	col := -1
	n := 0
	// Asked-for help goes to stdout (kiln -h | less), as Go tools do.
	for _, line := range strings.Split(out.String(), "\n") {
		fields := strings.Fields(line)
		if !strings.HasPrefix(line, "  ") || len(fields) < 2 {
			continue
		}
		c, ok := commands[fields[0]]
		if !ok {
			continue
		}
		n++
		at := strings.Index(line, c.summary)
		if col < 0 {
			col = at
		}
		if at != col || at <= len("  ")+len(fields[0]) {
			t.Errorf("summary of %s at column %d, want %d:\n%s", fields[0], at, col, out.String())
		}
	}
	if n != len(commands) {
		t.Fatalf("usage lists %d of %d commands:\n%s", n, len(commands), out.String())
	}
	if code := run(nil, &out, &errb); code != cli.ExitUsage {
		t.Fatalf("kiln without a command: exit %d, want %d", code, cli.ExitUsage)
	}
	errb.Reset()
	if code := run([]string{"frobnicate"}, &out, &errb); code != cli.ExitUsage || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: exit %d, stderr %s", code, errb.String())
	}
}
