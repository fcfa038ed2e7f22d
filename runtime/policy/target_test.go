package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func TestRootOf(t *testing.T) {
	allow := []string{"/data/**", "/data/deep/*", "/logs/app*", "/etc/kiln.toml", "*", "relative/**"}
	for s, want := range map[string]string{
		"/data":          "/data",
		"/data/a/b":      "/data",
		"/data/deep/x":   "/data/deep", // the deepest matching pattern wins
		"/logs/app1/x":   "/logs",
		"/logs/app":      "/logs",
		"/etc/kiln.toml": "/etc",
		"/elsewhere/x":   "/", // only "*" matches
		"/datax/y":       "/",
	} {
		if got := rootOf(allow, s); got != want {
			t.Errorf("rootOf(%q) = %q, want %q", s, got, want)
		}
	}
	if got := rootOf([]string{"/**"}, "/etc/passwd"); got != "/" {
		t.Errorf("/**: %q", got)
	}
}

func TestFSTargetAndConfirm(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := New(&workflow.Policy{FS: &workflow.FSPolicy{
		Read:  []string{data + "/**"},
		Write: []string{filepath.Join(data, "out") + "*", filepath.Join(root, "one.txt")},
	}})
	resolved, r, err := p.FSTarget(FSReadCheck, filepath.Join(data, "a", "b.txt"))
	if err != nil || resolved != filepath.Join(data, "a", "b.txt") || r != data {
		t.Fatalf("read target %q root %q, %v", resolved, r, err)
	}
	if _, r, err = p.FSTarget(FSWriteCheck, filepath.Join(data, "out1", "x")); err != nil || r != data {
		t.Fatalf("prefix root %q, %v", r, err)
	}
	if _, r, err = p.FSTarget(FSWriteCheck, filepath.Join(root, "one.txt")); err != nil || r != root {
		t.Fatalf("exact root %q, %v", r, err)
	}
	_, _, err = p.FSTarget(FSWriteCheck, filepath.Join(data, "other"))
	mustDenial(t, err, "fs.write", "other")
	_, _, err = p.FSTarget("fs.chmod", data)
	mustDenial(t, err, "fs.chmod", data)

	// Confirm checks the real path of what was opened, nothing else.
	if err := p.FSConfirm(FSWriteCheck, filepath.Join(data, "out2", "f")); err != nil {
		t.Fatal(err)
	}
	mustDenial(t, p.FSConfirm(FSWriteCheck, filepath.Join(data, "private", "f")), "fs.write", "private")
	mustDenial(t, p.FSConfirm(FSReadCheck, filepath.Join(root, "one.txt")), "fs.read", "one.txt")
	mustDenial(t, New(&workflow.Policy{}).FSConfirm(FSReadCheck, data), "fs.read", data)

	all := New(nil)
	if _, r, err := all.FSTarget(FSWriteCheck, filepath.Join(root, "x")); err != nil || r != "/" {
		t.Fatalf("allow-all root %q, %v", r, err)
	}
	if err := all.FSConfirm(FSWriteCheck, "/anything"); err != nil {
		t.Fatal(err)
	}
}

func TestShellTargetAndConfirm(t *testing.T) {
	dir := t.TempDir()
	tool := filepath.Join(dir, "tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := New(&workflow.Policy{Shell: &workflow.ShellPolicy{Commands: []string{tool}}})
	resolved, root, err := p.ShellTarget(tool)
	if err != nil || resolved != tool || root != dir {
		t.Fatalf("ShellTarget = %q, %q, %v", resolved, root, err)
	}
	if err := p.ShellConfirm(tool); err != nil {
		t.Fatal(err)
	}
	mustDenial(t, p.ShellConfirm(filepath.Join(dir, "other")), "shell.run", "other")
	if _, root, err := New(nil).ShellTarget(tool); err != nil || root != "/" {
		t.Fatalf("allow-all root %q, %v", root, err)
	}
}
