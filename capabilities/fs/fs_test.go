package fs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

type env struct {
	root, allowed, outside string
	engine                 *runtime.Engine
}

// setup makes root/allowed (read+write allowlisted) and root/outside.
func setup(t *testing.T) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{root: root, allowed: filepath.Join(root, "allowed"), outside: filepath.Join(root, "outside")}
	for _, d := range []string{e.allowed, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.engine = &runtime.Engine{Policy: policy.New(&workflow.Policy{FS: &workflow.FSPolicy{
		Read: []string{e.allowed + "/**"}, Write: []string{e.allowed + "/**"},
	}})}
	return e
}

func (e *env) run(t *testing.T, payload map[string]any, dryRun bool, nodes ...workflow.Node) *runtime.Report {
	t.Helper()
	wf := &workflow.Workflow{Name: "t", Nodes: nodes}
	for i := 1; i < len(nodes); i++ {
		wf.Edges = append(wf.Edges, workflow.Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e.engine.Run(context.Background(), p, runtime.RunOptions{
		Trigger: runtime.MakeTrigger("manual", runtime.Normalize(payload)), DryRun: dryRun})
}

func writeNode(id string) workflow.Node {
	return workflow.Node{ID: id, Type: "write_file", PathFrom: "trigger.path", ContentFrom: "trigger.content"}
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, _ := runtime.EncodeJSON(v)
	return string(b)
}

func TestWriteThenRead(t *testing.T) {
	e := setup(t)
	target := filepath.Join(e.allowed, "new", "deep", "out.txt")
	r := e.run(t, map[string]any{"path": target, "content": "héllo\n"}, false,
		writeNode("emit"),
		workflow.Node{ID: "load", Type: "read_file", PathFrom: "emit.path"})
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", r.Outcome)
	}
	if got := encode(t, r.Trace.Entries[0].Output); got != `{"bytes":7,"path":"`+target+`","written":true}` {
		t.Fatalf("write_file output %s", got)
	}
	if got := encode(t, r.Outcome.FinalValue); got != `{"bytes":7,"content":"héllo\n","path":"`+target+`"}` {
		t.Fatalf("read_file output %s", got)
	}
	// Atomic write leaves no temp files behind.
	entries, _ := os.ReadDir(filepath.Dir(target))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want only out.txt", len(entries))
	}
}

func TestWriteNonStringIsJSONAndKeepsMode(t *testing.T) {
	e := setup(t)
	target := filepath.Join(e.allowed, "data.json")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	content := map[string]any{"html": "<b>", "n": 1.0, "list": []any{1, true, nil}}
	r := e.run(t, map[string]any{"path": target, "content": content}, false, writeNode("emit"))
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", r.Outcome)
	}
	data, _ := os.ReadFile(target)
	if string(data) != `{"html":"<b>","list":[1,true,null],"n":1.0}` {
		t.Fatalf("content %s", data)
	}
	fi, _ := os.Stat(target)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want the existing 0600 kept", fi.Mode().Perm())
	}
}

func TestEscapesAreDeniedAndNothingIsWritten(t *testing.T) {
	e := setup(t)
	if err := os.Symlink(e.outside, filepath.Join(e.allowed, "link")); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"plain outside": filepath.Join(e.outside, "pwned.txt"),
		"dot-dot":       e.allowed + "/../outside/pwned.txt",
		"symlinked dir": filepath.Join(e.allowed, "link", "pwned.txt"),
	}
	for name, target := range cases {
		r := e.run(t, map[string]any{"path": target, "content": "x"}, false, writeNode("emit"))
		if r.Outcome.Status != runtime.StatusErrored || r.Outcome.Err.Class != runtime.ClassPolicy {
			t.Errorf("%s: %+v", name, r.Outcome)
			continue
		}
		if !strings.Contains(r.Outcome.Reason, "node emit (write_file): fs.write denied on") {
			t.Errorf("%s: reason %q", name, r.Outcome.Reason)
		}
		if r.Counters.PolicyDenials.Load() != 1 {
			t.Errorf("%s: %d denials", name, r.Counters.PolicyDenials.Load())
		}
	}
	if entries, _ := os.ReadDir(e.outside); len(entries) != 0 {
		t.Fatalf("something was written outside: %v", entries)
	}
	// Reading through a link to a file outside is refused too.
	os.WriteFile(filepath.Join(e.outside, "secret"), []byte("s"), 0o600)
	os.Symlink(filepath.Join(e.outside, "secret"), filepath.Join(e.allowed, "innocent.txt"))
	r := e.run(t, map[string]any{"path": filepath.Join(e.allowed, "innocent.txt")}, false,
		workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})
	if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, "fs.read denied on "+filepath.Join(e.outside, "secret")) {
		t.Fatalf("read via symlink: %+v", r.Outcome)
	}
}

func TestDryRun(t *testing.T) {
	e := setup(t)
	target := filepath.Join(e.allowed, "sub", "f.txt")
	r := e.run(t, map[string]any{"path": target, "content": "abc", "dir": filepath.Join(e.allowed, "d")}, true,
		writeNode("emit"),
		workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"},
		workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", r.Outcome)
	}
	want := []string{
		`{"bytes":3,"dry_run":true,"path":"` + target + `"}`,
		`{"dry_run":true,"path":"` + filepath.Join(e.allowed, "d") + `"}`,
		`{"dry_run":true,"path":"` + target + `"}`,
	}
	for i, w := range want {
		if got := encode(t, r.Trace.Entries[i].Output); got != w {
			t.Errorf("entry %d: %s, want %s", i, got, w)
		}
	}
	if entries, _ := os.ReadDir(e.allowed); len(entries) != 0 {
		t.Fatalf("dry-run touched the disk: %v", entries)
	}
	// Policy is still checked first.
	r = e.run(t, map[string]any{"path": filepath.Join(e.outside, "x"), "content": "abc"}, true, writeNode("emit"))
	if r.Outcome.Status != runtime.StatusErrored || r.Counters.PolicyDenials.Load() != 1 {
		t.Fatalf("dry-run denial: %+v", r.Outcome)
	}
}

func TestCreateDir(t *testing.T) {
	e := setup(t)
	dir := filepath.Join(e.allowed, "a", "b")
	for i := 0; i < 2; i++ { // idempotent
		r := e.run(t, map[string]any{"dir": dir}, false, workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"})
		if got := encode(t, r.Outcome.FinalValue); got != `{"created":true,"path":"`+dir+`"}` {
			t.Fatalf("run %d: %s (%s)", i, got, r.Outcome.Reason)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatal("directory not created")
	}
	file := filepath.Join(e.allowed, "file")
	os.WriteFile(file, nil, 0o644)
	r := e.run(t, map[string]any{"dir": file}, false, workflow.Node{ID: "mk", Type: "create_dir", PathFrom: "trigger.dir"})
	if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, "node mk (create_dir): create "+file) {
		t.Fatalf("mkdir over a file: %+v", r.Outcome)
	}
}

func TestToolErrors(t *testing.T) {
	e := setup(t)
	os.WriteFile(filepath.Join(e.allowed, "bin"), []byte{0xff, 0xfe, 0x00}, 0o644)
	cases := []struct {
		payload map[string]any
		node    workflow.Node
		want    string
	}{
		{map[string]any{"path": filepath.Join(e.allowed, "missing")},
			workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"}, "node load (read_file): read " + filepath.Join(e.allowed, "missing") + ": no such file"},
		{map[string]any{"path": filepath.Join(e.allowed, "bin")},
			workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"}, "not UTF-8"},
		{map[string]any{"path": 42},
			workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"}, `path_from "trigger.path" resolved to a number, want a string`},
		{map[string]any{"path": filepath.Join(e.allowed, "x")},
			writeNode("emit"), `node emit (write_file): content_from "trigger.content" did not resolve to a value`},
		{map[string]any{"path": e.allowed, "content": "x"},
			writeNode("emit"), "is a directory"},
	}
	for _, c := range cases {
		r := e.run(t, c.payload, false, c.node)
		if r.Outcome.Status != runtime.StatusErrored || !strings.Contains(r.Outcome.Reason, c.want) {
			t.Errorf("%v: %s %q, want %q", c.payload, r.Outcome.Status, r.Outcome.Reason, c.want)
		}
	}
}

func TestWriteBudget(t *testing.T) {
	e := setup(t)
	wf := &workflow.Workflow{Name: "t", Budget: &workflow.Budget{MaxFSWriteMB: 1}, Nodes: []workflow.Node{
		writeNode("w1"), {ID: "w2", Type: "write_file", PathFrom: "trigger.path2", ContentFrom: "trigger.content"},
	}, Edges: []workflow.Edge{{From: "w1", To: "w2"}}}
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 600<<10)
	r := e.engine.Run(context.Background(), p, runtime.RunOptions{Trigger: runtime.MakeTrigger("manual", map[string]any{
		"path": filepath.Join(e.allowed, "1"), "path2": filepath.Join(e.allowed, "2"), "content": big})})
	if r.Outcome.Status != runtime.StatusErrored || r.Outcome.Err.Class != runtime.ClassBudget || r.Outcome.LastNode != "w2" {
		t.Fatalf("%+v", r.Outcome)
	}
	if _, err := os.Stat(filepath.Join(e.allowed, "2")); !os.IsNotExist(err) {
		t.Fatal("the write over budget happened")
	}
}
