package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// TestCheckRefusesNestingBombs: `kiln check` refuses documents nested
// past 64 levels as unparsable (exit 2, file:line: message), before the
// TOML decoder runs: the first of these once took 15 GB and 92 s, the
// second passed 24 GB. The process stays under 64 MiB.
func TestCheckRefusesNestingBombs(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"inline.toml": "name = \"bomb\"\na = " + strings.Repeat("{b=", 20_000) + "1" + strings.Repeat("}", 20_000) + "\n",
		"arrays.toml": "name = \"bomb\"\na = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n",
	} {
		path := writeFile(t, dir, name, doc)
		// Started by a fresh copy of this test binary, which reports the
		// peak: a child started by this process would count this
		// process's own peak too (its memory is the child's until exec,
		// and grows with the tests run before). The fresh copy's start-up
		// (about 46 MiB) is still counted: the floor of what it reports.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, builtKiln(t), "check", path)
		cmd.Env = append(os.Environ(), maxRSSHelperEnv+"=1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitUsage || stderr.String() != path+":2: nesting deeper than 64\n" {
			t.Errorf("%s: %v, stderr %q", name, err, stderr.String())
		}
		rss, err := strconv.ParseInt(strings.TrimSpace(stdout.String()), 10, 64) // KiB
		if err != nil {
			t.Fatalf("%s: max RSS report %q: %v", name, stdout.String(), err)
		}
		t.Logf("%s: max RSS %d KiB", name, rss)
		if rss > 64<<10 {
			t.Errorf("%s: max RSS %d KiB, over 64 MiB", name, rss)
		}
	}
}

// maxRSSHelperEnv makes the test binary runForMaxRSS instead of testing.
const maxRSSHelperEnv = "KILN_TEST_MAXRSS_HELPER"

// runForMaxRSS runs args[0] with args[1:] (stderr passed through), prints
// its peak resident set size in KiB and exits with its exit code.
func runForMaxRSS(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintln(os.Stderr, err)
		return 125
	}
	fmt.Println(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
	return cmd.ProcessState.ExitCode()
}

// TestCheckNestingLimitLine: at the limit the workflow decodes (and here
// fails on the key holding the nesting); one level more is refused at
// the line where it opens.
func TestCheckNestingLimitLine(t *testing.T) {
	const dir = "../../testdata/hostile/toml/"
	code, _, stderr := runKiln(t, "check", dir+"workflow-depth-65.toml")
	if code != cli.ExitUsage || stderr != dir+"workflow-depth-65.toml:70: nesting deeper than 64\n" {
		t.Fatalf("depth 65: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runKiln(t, "check", dir+"workflow-depth-64.toml")
	if code != cli.ExitUsage || !strings.Contains(stderr, `workflow-depth-64.toml:7: nodes[0].deep: unknown key "deep"`) {
		t.Fatalf("depth 64: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := runKiln(t, "check", filepath.Join(dir, "brackets-in-text.toml"))
	if code != cli.ExitOK || stderr != "" {
		t.Fatalf("brackets in text: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
