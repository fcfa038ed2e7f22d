package graph_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestMermaidParses feeds every Mermaid drawing the tests know (each
// example, the loop/child/two-starts workflow with a run path and at depth
// 1, the hostile ids) to Mermaid's own parser, pinned by
// testdata/mermaid/package-lock.json (`make tools` installs it), and
// checks that the parsed flowchart has exactly the model's boxes, links and
// subgraphs: a label that escaped its quotes would add or lose some.
func TestMermaidParses(t *testing.T) {
	node := testtool.Command(t, "node")
	modules := filepath.Join(testtool.RepoRoot(t), ".cache", "mermaid", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "mermaid", "package.json")); err != nil {
		testtool.Missing(t, "Mermaid's parser is not installed in %s (run `make tools`)", modules)
	}
	type want struct{ vertices, edges, subgraphs int }
	var names []string
	var docs []string
	var wants []want
	add := func(name string, g *graph.Graph) {
		w := want{vertices: len(g.Root.Entries) + len(g.Nodes()), edges: len(g.Edges())}
		for _, e := range g.Root.Entries {
			if e.To != nil {
				w.edges++
			}
		}
		for _, n := range g.Nodes() {
			for _, ch := range n.Children {
				w.edges++
				if ch.Cluster == nil {
					w.vertices++
				} else {
					w.subgraphs++
				}
			}
		}
		names, docs, wants = append(names, name), append(docs, g.Mermaid()), append(wants, w)
	}
	build := func(name string, g *graph.Graph, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		add(name, g)
	}
	wfs := examples(t)
	var exampleNames []string
	for name := range wfs {
		exampleNames = append(exampleNames, name)
	}
	sort.Strings(exampleNames)
	for _, name := range exampleNames {
		g, err := graph.Build(wfs[name], graph.Options{DeadEnds: gen.GraphDeadEnds})
		build(name, g, err)
	}
	g, err := graph.Build(loopChildTwoStarts(), graph.Options{Path: &graph.Path{Nodes: []string{"fetch", "check", "fetch", "check", "ask"}, Failed: "ask"}})
	build("loop-child-two-starts", g, err)
	g, err = graph.Build(loopChildTwoStarts(), graph.Options{Depth: 1})
	build("depth-1", g, err)
	g, err = graph.Build(hostile(), graph.Options{})
	build("hostile", g, err)

	in, err := json.Marshal(docs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join("testdata", "mermaid", "check.mjs"), modules)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node check.mjs: %v\n%s", err, stderr.String())
	}
	var got []struct {
		Type                       string
		Error                      string
		Vertices, Edges, Subgraphs int
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != len(docs) {
		t.Fatalf("checker output (%v): %s", err, out.String())
	}
	for i, r := range got {
		if r.Error != "" {
			t.Errorf("%s: Mermaid refuses the drawing: %s\n%s", names[i], r.Error, docs[i])
			continue
		}
		w := wants[i]
		if r.Type != "flowchart-v2" || r.Vertices != w.vertices || r.Edges != w.edges || r.Subgraphs != w.subgraphs {
			t.Errorf("%s: Mermaid parsed a %s with %d boxes, %d links, %d subgraphs; the model has %d, %d, %d\n%s",
				names[i], r.Type, r.Vertices, r.Edges, r.Subgraphs, w.vertices, w.edges, w.subgraphs, docs[i])
		}
	}
}
