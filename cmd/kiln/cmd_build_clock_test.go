package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// openPTY opens a pseudo-terminal: the master, which reads what is written
// to the terminal, and the terminal itself.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testtool.Missing(t, "no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		t.Fatalf("name the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

// slowGo puts first in PATH a go that waits two seconds before `go build`,
// then runs the real go: on a warm build cache the build of hello can end
// before the clock's first tick, and the test must see one.
func slowGo(t *testing.T) {
	t.Helper()
	real, err := exec.LookPath("go")
	if err != nil {
		testtool.Missing(t, "no go command: %v", err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = build ]; then sleep 2; fi\nexec '%s' \"$@\"\n", real)
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// clockLine is one redraw of the clock: carriage return, then the count.
var clockLine = regexp.MustCompile(`\rkiln: go build running [1-9][0-9]*s `)

// TestBuildClockOnTerminal runs kiln build with stderr on a
// pseudo-terminal: it says the first build compiles every dependency and
// counts go build's seconds, then erases the clock's line. With stderr on
// a pipe (-v, so progress lines are printed) there is no clock.
func TestBuildClockOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sealed hello")
	}
	slowGo(t)
	master, tty := openPTY(t)
	var seen bytes.Buffer
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(&seen, master) // ends with EIO once the terminal is closed
	}()
	bin := filepath.Join(t.TempDir(), "hello")
	var stdout bytes.Buffer
	code := run([]string{"build", helloExample, "-o", bin}, &stdout, tty)
	tty.Close()
	<-drained
	out := seen.String()
	if code != cli.ExitOK {
		t.Fatalf("kiln build on a terminal: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "the first build compiles every dependency") {
		t.Errorf("the terminal was not told the first build compiles every dependency:\n%q", out)
	}
	if !clockLine.MatchString(out) {
		t.Errorf("no clock on the terminal while go build ran:\n%q", out)
	}
	if !strings.Contains(out, "\r\033[K") {
		t.Errorf("the clock's line was not erased:\n%q", out)
	}

	// A pipe is no terminal: progress lines with -v, but no clock.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var piped bytes.Buffer
	drained = make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(&piped, r)
	}()
	code = run([]string{"build", helloExample, "-o", bin, "-v"}, &stdout, w)
	w.Close()
	<-drained
	out = piped.String()
	if code != cli.ExitOK || !strings.Contains(out, "kiln: compiling with go") {
		t.Fatalf("kiln build -v on a pipe: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "go build running") || strings.Contains(out, "first build compiles") || strings.Contains(out, "\r") {
		t.Errorf("a pipe got the terminal clock:\n%q", out)
	}
}
