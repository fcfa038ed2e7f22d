package fs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/beneath/beneathtest"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func compile(t *testing.T, nodes ...workflow.Node) *runtime.Program {
	t.Helper()
	p, err := runtime.Compile(&workflow.Workflow{Name: "t", Nodes: nodes}, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) call(p *runtime.Program, payload map[string]any) *runtime.Report {
	return e.engine.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", payload)})
}

// allowed/x flips between a regular file and a symlink to a file the
// allowlist does not cover while read_file reads it: no read ever returns
// that file's content. The link goes outside the root (absolute), or stays
// beneath the root but outside an exact pattern (relative), where only the
// confirmation of the opened file stands in the way.
func TestReadRaceNeverLeaksOutside(t *testing.T) {
	for _, tc := range []struct{ name, pattern, link string }{
		{"absolute link out of the root", "/**", ""},
		{"relative link beside an exact pattern", "/x", "private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			secret := filepath.Join(e.outside, "secret")
			if tc.link != "" {
				secret = filepath.Join(e.allowed, tc.link)
			}
			if err := os.WriteFile(secret, []byte("SECRET"), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.link == "" {
				tc.link = secret
			}
			e.engine.Policy = policy.New(&workflow.Policy{FS: &workflow.FSPolicy{Read: []string{e.allowed + tc.pattern}}})
			x, alt := filepath.Join(e.allowed, "x"), filepath.Join(e.allowed, "alt")
			if err := os.WriteFile(x, []byte("inside"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.link, alt); err != nil {
				t.Fatal(err)
			}
			p := compile(t, workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})
			start := time.Now()
			stop := beneathtest.Swap(t, x, alt)
			read, refused := 0, 0
			for range 2000 {
				r := e.call(p, map[string]any{"path": x})
				if r.Outcome.Status != runtime.StatusCompleted {
					refused++
					continue
				}
				if content := r.Outcome.FinalValue.(map[string]any)["content"]; content != "inside" {
					stop()
					t.Fatalf("read returned %q", content)
				}
				read++
			}
			swaps := stop()
			t.Logf("2000 reads in %v: %d read inside, %d refused; %d swaps", time.Since(start), read, refused, swaps)
			if read == 0 || refused == 0 {
				t.Fatal("the race was not exercised")
			}
		})
	}
}

// allowed/d flips between a real directory and a symlink to a directory
// the allowlist does not cover while write_file writes into it and
// create_dir makes directories in it: nothing ever lands there. As for
// reads, the link leaves the root, or stays beneath it but outside a
// prefix pattern.
func TestWriteRaceNeverLandsOutside(t *testing.T) {
	for _, tc := range []struct{ name, pattern, link string }{
		{"absolute link out of the root", "/**", ""},
		{"relative link beside a prefix pattern", "/d*", "private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			target := e.outside
			if tc.link != "" {
				target = filepath.Join(e.allowed, tc.link)
				if err := os.Mkdir(target, 0o755); err != nil {
					t.Fatal(err)
				}
			} else {
				tc.link = target
			}
			e.engine.Policy = policy.New(&workflow.Policy{FS: &workflow.FSPolicy{Write: []string{e.allowed + tc.pattern}}})
			d, alt := filepath.Join(e.allowed, "d"), filepath.Join(e.allowed, "alt")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.link, alt); err != nil {
				t.Fatal(err)
			}
			write := compile(t, writeNode("emit"))
			mkdir := compile(t, workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"})
			start := time.Now()
			stop := beneathtest.Swap(t, d, alt)
			wrote, made := 0, 0
			for i := range 1000 {
				r := e.call(write, map[string]any{"path": filepath.Join(d, "f.txt"), "content": "x"})
				if r.Outcome.Status == runtime.StatusCompleted {
					wrote++
				}
				r = e.call(mkdir, map[string]any{"dir": filepath.Join(d, fmt.Sprint("n", i), "deeper")})
				if r.Outcome.Status == runtime.StatusCompleted {
					made++
				}
			}
			swaps := stop()
			t.Logf("1000 writes and 1000 mkdirs in %v: %d written, %d made; %d swaps", time.Since(start), wrote, made, swaps)
			if entries, _ := os.ReadDir(target); len(entries) != 0 {
				t.Fatalf("%d entries landed in %s, the first %s", len(entries), target, entries[0].Name())
			}
			if wrote == 0 || made == 0 || wrote == 1000 {
				t.Fatal("the race was not exercised")
			}
		})
	}
}

// Symlinks that stay in the allowlist keep working, for reads and writes.
func TestSymlinksInsideKeepWorking(t *testing.T) {
	e := setup(t)
	real := filepath.Join(e.allowed, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(real, "f.txt"), []byte("in"), 0o644)
	os.Symlink(real, filepath.Join(e.allowed, "abs"))         // absolute, inside
	os.Symlink("real/f.txt", filepath.Join(e.allowed, "rel")) // relative, inside
	r := e.run(t, map[string]any{"path": filepath.Join(e.allowed, "abs", "new.txt"), "content": "new", "rel": filepath.Join(e.allowed, "rel")}, false,
		writeNode("emit"),
		workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.rel"})
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", r.Outcome)
	}
	if got := encode(t, r.Outcome.FinalValue); got != `{"bytes":2,"content":"in","path":"`+filepath.Join(real, "f.txt")+`"}` {
		t.Fatalf("read %s", got)
	}
	if data, err := os.ReadFile(filepath.Join(real, "new.txt")); err != nil || string(data) != "new" {
		t.Fatalf("written through the link: %q, %v", data, err)
	}
	r = e.run(t, map[string]any{"dir": filepath.Join(e.allowed, "abs", "sub")}, false,
		workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"})
	if fi, err := os.Stat(filepath.Join(real, "sub")); r.Outcome.Status != runtime.StatusCompleted || err != nil || !fi.IsDir() {
		t.Fatalf("mkdir through the link: %+v, %v", r.Outcome, err)
	}
}

// Magic links (/proc/self/root/...) lead nowhere the allowlist does not
// already allow, named directly or through a link in the allowlist.
func TestMagicLinksRefused(t *testing.T) {
	e := setup(t)
	secret := filepath.Join(e.outside, "secret")
	os.WriteFile(secret, []byte("SECRET"), 0o644)
	magic := "/proc/self/root" + secret
	os.Symlink(magic, filepath.Join(e.allowed, "m"))
	for _, path := range []string{magic, filepath.Join(e.allowed, "m")} {
		r := e.run(t, map[string]any{"path": path}, false, workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})
		if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, "fs.read denied") {
			t.Errorf("%s: %+v", path, r.Outcome)
		}
	}
	// Even with /proc allowlisted, a magic link on the way is refused.
	e.engine.Policy = policy.New(&workflow.Policy{FS: &workflow.FSPolicy{Read: []string{"/proc/**"}}})
	r := e.run(t, map[string]any{"path": "/proc/self/root/etc/hostname"}, false, workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})
	if r.Outcome.Status != runtime.StatusErrored {
		t.Fatalf("read through /proc/self/root: %+v", r.Outcome)
	}
}

// A write may create its allowlist root, but no directory above it: that
// would be a write outside the allowlist.
func TestWriteCreatesRootButNothingAbove(t *testing.T) {
	e := setup(t)
	newRoot := filepath.Join(e.allowed, "new-root")
	e.engine.Policy = policy.New(&workflow.Policy{FS: &workflow.FSPolicy{
		Write: []string{newRoot + "/**", filepath.Join(e.outside, "a", "b") + "/**", filepath.Join(e.allowed, "out") + "*"},
	}})
	r := e.run(t, map[string]any{"path": filepath.Join(newRoot, "f.txt"), "content": "x"}, false, writeNode("emit"))
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("write under a missing root: %+v", r.Outcome)
	}
	r = e.run(t, map[string]any{"path": filepath.Join(e.outside, "a", "b", "f.txt"), "content": "x"}, false, writeNode("emit"))
	if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, "fs.write denied on "+filepath.Join(e.outside, "a")) {
		t.Fatalf("write creating a parent above the root: %+v", r.Outcome)
	}
	if entries, _ := os.ReadDir(e.outside); len(entries) != 0 {
		t.Fatalf("made %v outside", entries)
	}
	// A prefix pattern: its directories are created, others are not.
	r = e.run(t, map[string]any{"path": filepath.Join(e.allowed, "out1", "f.txt"), "content": "x"}, false, writeNode("emit"))
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("write under a prefix: %+v", r.Outcome)
	}
}
