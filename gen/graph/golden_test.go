package graph_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// examples loads every example workflow of the repository.
func examples(t *testing.T) map[string]*workflow.Workflow {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testtool.RepoRoot(t), "examples", "*", "workflow.toml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no example workflows: %v", err)
	}
	out := map[string]*workflow.Workflow{}
	for _, p := range paths {
		wf, err := gen.Load(p, gen.LoadOptions{})
		if err != nil {
			t.Fatalf("load %s: %v", p, err)
		}
		out[filepath.Base(filepath.Dir(p))] = wf
	}
	return out
}

// render draws wf in the three formats, with the lint's dead-end analysis
// as `kiln graph` does.
func render(t *testing.T, wf *workflow.Workflow, opts graph.Options) (mermaid, dot string, svg []byte) {
	t.Helper()
	g, err := graph.Build(wf, opts)
	if err != nil {
		t.Fatal(err)
	}
	svg, err = g.SVG()
	if err != nil {
		t.Fatal(err)
	}
	return g.Mermaid(), g.DOT(), svg
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./gen/graph -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if the change is meant, run go test ./gen/graph -update and review the diff.\ngot:\n%s", path, got)
	}
}

// TestGoldens draws every example workflow in the three formats; the
// same input must give byte-identical output (drawn twice).
func TestGoldens(t *testing.T) {
	for name, wf := range examples(t) {
		t.Run(name, func(t *testing.T) {
			m1, d1, s1 := render(t, wf, graph.Options{DeadEnds: gen.GraphDeadEnds})
			m2, d2, s2 := render(t, wf, graph.Options{DeadEnds: gen.GraphDeadEnds})
			if m1 != m2 || d1 != d2 || !bytes.Equal(s1, s2) {
				t.Fatal("two drawings of the same workflow differ")
			}
			golden(t, name+".mmd", []byte(m1))
			golden(t, name+".dot", []byte(d1))
			golden(t, name+".svg", s1)
			wellFormed(t, s1)
		})
	}
}

// TestDotAcceptsEveryExample runs Graphviz's own dot on every DOT output.
func TestDotAcceptsEveryExample(t *testing.T) {
	dot := testtool.Command(t, "dot")
	wfs := examples(t)
	wfs["hostile"] = hostile()
	for name, wf := range wfs {
		t.Run(name, func(t *testing.T) {
			_, d, _ := render(t, wf, graph.Options{})
			runDot(t, dot, d)
		})
	}
}

func runDot(t *testing.T, dot, src string) []byte {
	t.Helper()
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = bytes.NewReader([]byte(src))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dot -Tsvg refused the DOT output: %v\n%s\n--- input:\n%s", err, errb.String(), src)
	}
	if errb.Len() > 0 {
		t.Fatalf("dot -Tsvg warned: %s\n--- input:\n%s", errb.String(), src)
	}
	wellFormed(t, out.Bytes())
	return out.Bytes()
}

// wellFormed decodes the whole document with encoding/xml.
func wellFormed(t *testing.T, doc []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	dec.Entity = xml.HTMLEntity
	for {
		_, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

// TestLintDeadEnds: kiln graph marks exactly the nodes `kiln check`'s
// lint warns about (gen.GraphDeadEnds reads gen.Lint's warnings).
func TestLintDeadEnds(t *testing.T) {
	dir := t.TempDir()
	src := `name = "deadends"

[[start_nodes]]
name = "main"
source = "manual"

[[nodes]]
id = "is_big"
type = "condition"
expr = "trigger.big"

[[nodes]]
id = "route"
type = "switch"
expr = "trigger.kind"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "is_big"
to = "route"
when = "true"

[[edges]]
from = "route"
to = "done"
when = "a"
`
	path := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := gen.Load(path, gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warnings := gen.Lint(wf)
	marks := gen.GraphDeadEnds(wf)
	if len(warnings) != 2 || len(marks) != 2 || marks["is_big"] == "" || marks["route"] == "" || marks["done"] != "" {
		t.Fatalf("lint warnings %v, graph marks %v: want is_big and route marked", warnings, marks)
	}
	g, err := graph.Build(wf, graph.Options{DeadEnds: gen.GraphDeadEnds})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(g.Mermaid(), "can dead-end"); n != 2 {
		t.Errorf("mermaid marks %d nodes, want 2", n)
	}
	for name, wf := range examples(t) {
		total := 0
		for _, w := range workflow.Tree(wf) {
			for _, reason := range gen.GraphDeadEnds(w) {
				total += strings.Count(reason, "; ") + 1
			}
		}
		if want := len(gen.Lint(wf)); total != want {
			t.Errorf("%s: graph marks carry %d findings, lint has %d", name, total, want)
		}
	}
}
