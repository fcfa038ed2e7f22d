package main

import (
	"regexp"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestVersion: `kiln version` and `kiln --version` print the same line,
// naming kiln, its version, the Go version and the platform.
func TestVersion(t *testing.T) {
	code, v1, stderr := runKiln(t, "version")
	if code != cli.ExitOK || stderr != "" {
		t.Fatalf("kiln version: exit %d stderr %q", code, stderr)
	}
	want := regexp.MustCompile(`^kiln \S+( h1:\S+)? ` + regexp.QuoteMeta(goruntime.Version()) + ` ` + goruntime.GOOS + `/` + goruntime.GOARCH + "\n$")
	if !want.MatchString(v1) {
		t.Errorf("kiln version = %q, want %s", v1, want)
	}
	for _, flag := range []string{"--version", "-version"} {
		if code, v2, _ := runKiln(t, flag); code != cli.ExitOK || v2 != v1 {
			t.Errorf("kiln %s = %q (exit %d), want %q", flag, v2, code, v1)
		}
	}
}

// TestHelpCommand: `kiln help build` prints build's help on stdout and
// exits 0; an unknown command is a usage error.
func TestHelpCommand(t *testing.T) {
	code, stdout, _ := runKiln(t, "help", "build")
	if code != cli.ExitOK || !strings.HasPrefix(stdout, "usage: kiln build") || !strings.Contains(stdout, "-allow-blocked") {
		t.Errorf("kiln help build: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runKiln(t, "help")
	if code != cli.ExitOK || !strings.Contains(stdout, "commands:") {
		t.Errorf("kiln help: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runKiln(t, "help", "frobnicate"); code != cli.ExitUsage || !strings.Contains(stderr, "frobnicate") {
		t.Errorf("kiln help frobnicate: exit %d %q", code, stderr)
	}
}

// TestMissingArgumentsAreNamed: each command says which argument or flag
// is missing, on its first line.
func TestMissingArgumentsAreNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "wf.toml"}, "kiln build: -o BIN is required"},
		{[]string{"build", "-o", "bin"}, "kiln build: WORKFLOW.toml is required"},
		{[]string{"build", "a.toml", "b.toml", "-o", "bin"}, "kiln build: unexpected argument b.toml"},
		{[]string{"gen", "wf.toml"}, "kiln gen: -o DIR is required"},
		{[]string{"sign", "bin"}, "kiln sign: --key KEY is required"},
		{[]string{"sign", "--key", "k"}, "kiln sign: BIN is required"},
		{[]string{"verify", "bin"}, "kiln verify: --key cosign.pub is required"},
		{[]string{"inspect"}, "kiln inspect: BIN is required"},
		{[]string{"check"}, "kiln check: WORKFLOW.toml is required"},
	} {
		code, _, stderr := runKiln(t, c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if code != cli.ExitUsage || !strings.HasPrefix(first, c.want) {
			t.Errorf("kiln %v: exit %d, first line %q, want %q", c.args, code, first, c.want)
		}
	}
}

// TestShellQuote: printed commands paste back into a POSIX shell.
func TestShellQuote(t *testing.T) {
	got := gen.ShellJoin("go", "build", "-ldflags=-s -w -buildid=", "-o", "/tmp/my bin", "it's", "")
	want := `go build '-ldflags=-s -w -buildid=' -o '/tmp/my bin' 'it'\''s' ''`
	if got != want {
		t.Errorf("ShellJoin = %s, want %s", got, want)
	}
}
