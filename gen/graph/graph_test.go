package graph_test

import (
	"bytes"
	"encoding/xml"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/graph"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func intp(n int) *int { return &n }

// loopChildTwoStarts has a bounded loop edge, a call of a child workflow
// and two start nodes (one behind an HTTP route, one behind a cron
// trigger).
func loopChildTwoStarts() *workflow.Workflow {
	child := &workflow.Workflow{
		Name:  "child",
		Nodes: []workflow.Node{{ID: "c_read", Type: "read_file"}, {ID: "c_done", Type: "terminate"}},
		Edges: []workflow.Edge{{From: "c_read", To: "c_done"}},
	}
	return &workflow.Workflow{
		Name: "parent",
		StartNodes: []workflow.StartNode{
			{Name: "api", Source: "http", EntryNode: "fetch"},
			{Name: "nightly", Source: "event", EntryNode: "check"},
		},
		HTTPRoutes: []workflow.HTTPRoute{{Method: "POST", Path: "/run", StartNode: "api"}},
		Triggers:   []workflow.Trigger{{Type: "cron", Schedule: "0 5 * * *", StartNode: "nightly"}},
		Nodes: []workflow.Node{
			{ID: "fetch", Type: "http_request"},
			{ID: "check", Type: "condition", Expr: "fetch.ok"},
			{ID: "sub", Type: "call", Workflow: "child.toml"},
			{ID: "ask", Type: "llm_infer"},
			{ID: "out", Type: "template_render"},
		},
		Edges: []workflow.Edge{
			{From: "fetch", To: "check"},
			{From: "check", To: "sub", When: "true"},
			{From: "check", To: "fetch", When: "false", MaxIterations: intp(3)},
			{From: "check", To: "ask", When: "false"},
			{From: "sub", To: "out"},
			{From: "ask", To: "out"},
		},
		Children: map[string]*workflow.Workflow{"child.toml": child},
	}
}

func TestModelLoopChildTwoStarts(t *testing.T) {
	g, err := graph.Build(loopChildTwoStarts(), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Root.Entries) != 2 {
		t.Fatalf("entries = %d, want 2", len(g.Root.Entries))
	}
	want := map[string]struct{ to, line string }{"api": {"fetch", "POST /run"}, "nightly": {"check", "cron 0 5 * * *"}}
	for _, e := range g.Root.Entries {
		w := want[e.Name]
		if e.To == nil || e.To.ID != w.to || len(e.Lines) != 1 || e.Lines[0] != w.line {
			t.Errorf("entry %q: to %v, lines %q; want %s, %q", e.Name, e.To, e.Lines, w.to, w.line)
		}
	}
	loops := 0
	for _, e := range g.Root.Edges {
		if e.MaxIterations > 0 {
			loops++
			if e.From.ID != "check" || e.To.ID != "fetch" || e.MaxIterations != 3 || e.When != "false" {
				t.Errorf("loop edge %s -> %s (%d, %q)", e.From.ID, e.To.ID, e.MaxIterations, e.When)
			}
		}
	}
	if loops != 1 {
		t.Errorf("loop edges = %d, want 1", loops)
	}
	var sub *graph.Node
	for _, n := range g.Root.Nodes {
		if n.ID == "sub" {
			sub = n
		}
	}
	if sub == nil || len(sub.Children) != 1 || sub.Children[0].Cluster == nil {
		t.Fatalf("call node has no drawn child: %+v", sub)
	}
	ch := sub.Children[0]
	if ch.Entry == nil || ch.Entry.ID != "c_read" || len(ch.Cluster.Nodes) != 2 || ch.Cluster.Nodes[0].Key == "c_read" {
		t.Errorf("child: entry %v, nodes %d, first key %q (want a key scoped under the call)", ch.Entry, len(ch.Cluster.Nodes), ch.Cluster.Nodes[0].Key)
	}
	cats := map[string]graph.Category{"fetch": graph.Action, "check": graph.Control, "sub": graph.Control, "ask": graph.Intelligence, "out": graph.Transform}
	for _, n := range g.Root.Nodes {
		if n.Category != cats[n.ID] {
			t.Errorf("%s: category %s, want %s", n.ID, n.Category, cats[n.ID])
		}
	}
	if ch.Cluster.Nodes[0].Category != graph.Input {
		t.Errorf("read_file: category %s, want input", ch.Cluster.Nodes[0].Category)
	}

	// Depth 1 names the child without drawing it.
	g1, err := graph.Build(loopChildTwoStarts(), graph.Options{Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(g1.Nodes()) != 5 || !strings.Contains(g1.Mermaid(), "calls child.toml") {
		t.Errorf("depth 1: %d nodes (want 5), mermaid:\n%s", len(g1.Nodes()), g1.Mermaid())
	}
}

// svgElem is a generic XML element tree.
type svgElem struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Kids    []svgElem  `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (e *svgElem) attr(name string) string {
	for _, a := range e.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (e *svgElem) hasClass(c string) bool {
	return strings.Contains(" "+e.attr("class")+" ", " "+c+" ")
}

func (e *svgElem) find(fn func(*svgElem) bool) []*svgElem {
	var out []*svgElem
	var visit func(x *svgElem)
	visit = func(x *svgElem) {
		if fn(x) {
			out = append(out, x)
		}
		for i := range x.Kids {
			visit(&x.Kids[i])
		}
	}
	visit(e)
	return out
}

func parseSVG(t *testing.T, doc []byte) *svgElem {
	t.Helper()
	wellFormed(t, doc)
	var root svgElem
	if err := xml.Unmarshal(doc, &root); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	if root.XMLName.Local != "svg" {
		t.Fatalf("root element %q", root.XMLName.Local)
	}
	return &root
}

// groups returns the <g> elements with class c.
func groups(root *svgElem, c string) []*svgElem {
	return root.find(func(e *svgElem) bool { return e.XMLName.Local == "g" && e.hasClass(c) })
}

func TestSVGStructure(t *testing.T) {
	g, err := graph.Build(loopChildTwoStarts(), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := g.SVG()
	if err != nil {
		t.Fatal(err)
	}
	root := parseSVG(t, doc)
	nodes, edges := groups(root, "node"), groups(root, "edge")
	if len(nodes) != len(g.Nodes()) || len(nodes) != 7 {
		t.Errorf("node groups = %d, model nodes = %d, want 7", len(nodes), len(g.Nodes()))
	}
	if len(edges) != len(g.Edges()) || len(edges) != 7 {
		t.Errorf("edge groups = %d, model edges = %d, want 7", len(edges), len(g.Edges()))
	}
	ids := map[string]bool{}
	for _, e := range root.find(func(e *svgElem) bool { return e.attr("id") != "" }) {
		if ids[e.attr("id")] {
			t.Errorf("id %q used twice", e.attr("id"))
		}
		ids[e.attr("id")] = true
	}
	for _, id := range []string{"node-fetch", "node-check", "node-sub", "edge-check-fetch", "edge-sub-out"} {
		if !ids[id] {
			t.Errorf("no element with id %q", id)
		}
	}
	loops := groups(root, "loop")
	if len(loops) != 1 || loops[0].attr("id") != "edge-check-fetch" || !strings.Contains(loops[0].find(func(e *svgElem) bool { return e.XMLName.Local == "text" })[0].Text, "≤3") {
		t.Errorf("loop edge groups: %d, want the one check -> fetch labelled with its bound", len(loops))
	}
	if es := groups(root, "entry"); len(es) != 2 {
		t.Errorf("entry markers = %d, want 2", len(es))
	}
	if ls := groups(root, "entry-link"); len(ls) != 2 {
		t.Errorf("entry links = %d, want 2", len(ls))
	}
	// The child's nodes are drawn inside the call node's group.
	var sub *svgElem
	for _, n := range nodes {
		if n.attr("data-node") == "sub" {
			sub = n
		}
	}
	if sub == nil {
		t.Fatal("no group for node sub")
	}
	inner := groups(sub, "node")
	if len(inner) != 3 || inner[1].attr("data-node") != "c_read" || inner[2].attr("data-node") != "c_done" {
		t.Errorf("call node group holds %d node groups, want itself and c_read, c_done", len(inner))
	}
	if len(groups(sub, "cluster")) != 1 || len(groups(sub, "edge")) != 1 {
		t.Error("call node group lacks the child's cluster and its edge")
	}
	// Shapes by category: the condition is an octagon (polygon), the
	// template a rounded rect.
	for _, n := range nodes {
		box := n.find(func(e *svgElem) bool { return e.attr("class") == "box" })
		if len(box) == 0 {
			t.Fatalf("%s: no box", n.attr("data-node"))
		}
		want := map[string]string{"input": "polygon", "intelligence": "polygon", "control": "polygon", "transform": "rect", "action": "rect"}
		for c, el := range want {
			if n.hasClass(c) && box[0].XMLName.Local != el {
				t.Errorf("%s (%s): box is %s, want %s", n.attr("data-node"), c, box[0].XMLName.Local, el)
			}
		}
	}
}

func TestMermaidAndDOTStructure(t *testing.T) {
	g, err := graph.Build(loopChildTwoStarts(), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := g.Mermaid()
	for _, want := range []string{
		`e0(["start api<br/>POST /run"])`, `e1(["start nightly<br/>cron 0 5 * * *"])`,
		`n1 -.->|"false · loop ≤3"| n0`, `subgraph c1["child (child.toml)"]`, `n2 -.-o|"calls"| n5`,
		`n1{"check<br/>condition"}`, `class n0 action`, `class n1,n2,n6 control`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, m)
		}
	}
	d := g.DOT()
	for _, want := range []string{
		`n1 -> n0 [label="false · loop ≤3", style=dashed, color="#8e24aa", constraint=false];`,
		`subgraph cluster_c1 {`, `n2 -> n5 [label="calls", style=dotted, arrowhead=odot, lhead=cluster_c1];`,
		`e0 -> n0;`, `e1 -> n1;`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("dot lacks %q:\n%s", want, d)
		}
	}
	if dot := testtool.Command(t, "dot"); dot != "" {
		out := runDot(t, dot, d)
		root := parseSVG(t, out)
		if n := len(groups(root, "node")); n != 7+2 { // nodes and entries
			t.Errorf("dot drew %d nodes, want 9", n)
		}
	}
}

func TestPath(t *testing.T) {
	g, err := graph.Build(loopChildTwoStarts(), graph.Options{Path: &graph.Path{
		Nodes: []string{"fetch", "check", "fetch", "check", "ask"}, Failed: "ask",
	}})
	if err != nil {
		t.Fatal(err)
	}
	taken := map[string]bool{}
	for _, e := range g.Root.Edges {
		if e.Taken {
			taken[e.From.ID+">"+e.To.ID+":"+e.When] = true
		}
	}
	want := map[string]bool{"fetch>check:": true, "check>fetch:false": true, "check>ask:false": true}
	if len(taken) != len(want) {
		t.Errorf("taken edges %v, want %v", taken, want)
	}
	for k := range want {
		if !taken[k] {
			t.Errorf("edge %s not taken", k)
		}
	}
	for _, n := range g.Root.Nodes {
		visited := n.ID == "fetch" || n.ID == "check" || n.ID == "ask"
		if n.Visited != visited || n.Failed != (n.ID == "ask") {
			t.Errorf("%s: visited %v failed %v", n.ID, n.Visited, n.Failed)
		}
	}
	doc, _ := g.SVG()
	root := parseSVG(t, doc)
	if n := len(groups(root, "taken")); n != 3 {
		t.Errorf("SVG taken edges = %d, want 3", n)
	}
	if f := groups(root, "failed"); len(f) != 1 || f[0].attr("data-node") != "ask" {
		t.Error("SVG does not mark ask failed")
	}
	if !strings.Contains(g.Mermaid(), "linkStyle 1,3,4 stroke:#1565c0") {
		t.Errorf("mermaid linkStyle of taken edges missing:\n%s", g.Mermaid())
	}

	// With branches, only the edge of the branch taken is marked.
	twins := &workflow.Workflow{Name: "twins",
		Nodes: []workflow.Node{{ID: "route", Type: "switch"}, {ID: "summary", Type: "merge"}},
		Edges: []workflow.Edge{{From: "route", To: "summary", When: "opened"}, {From: "route", To: "summary", When: "synchronize"}}}
	for _, c := range []struct {
		branches []string
		want     string
	}{{nil, "opened synchronize"}, {[]string{"synchronize", ""}, "synchronize"}} {
		g, err := graph.Build(twins, graph.Options{Path: &graph.Path{Nodes: []string{"route", "summary"}, Branches: c.branches}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range g.Root.Edges {
			if e.Taken {
				got = append(got, e.When)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("branches %q: taken %q, want %q", c.branches, got, c.want)
		}
	}
	for _, bad := range []*graph.Path{
		{Nodes: []string{"route", "summary"}, Branches: []string{"closed", ""}},
		{Nodes: []string{"route", "summary"}, Branches: []string{"opened"}},
	} {
		if _, err := graph.Build(twins, graph.Options{Path: bad}); err == nil {
			t.Errorf("path %+v accepted", bad)
		}
	}

	// A path through nodes or edges the workflow lacks is refused.
	for _, p := range []*graph.Path{
		{Nodes: []string{"fetch", "gone"}},
		{Nodes: []string{"fetch", "out"}},
		{Failed: "gone"},
		{Nodes: []string{"check"}, Edges: []graph.Step{{From: "check", To: "sub", When: "false"}}},
	} {
		if _, err := graph.Build(loopChildTwoStarts(), graph.Options{Path: p}); err == nil {
			t.Errorf("path %+v accepted", p)
		}
	}
}

// hostileIDs are node ids and labels that try to break out of each
// format's quoting.
var hostileIDs = []string{
	`a"];` + "\n" + `evil [label="x`,
	`</text><script>alert(1)</script>`,
	`%%{init: {"securityLevel": "loose"}}%%`,
	`x"]] --> y[["z`,
	`\N\G\l"\`,
	"bidi\u202eevil\u2066",
	"nl\r\nsubgraph end",
	"bad\xffutf8",
	"&amp;<![CDATA[x]]>",
	`click n0 call alert()`,
	"tab\tx|pipe#35;",
}

func hostile() *workflow.Workflow {
	wf := &workflow.Workflow{Name: `evil"name</title>` + "\n}"}
	for i, id := range hostileIDs {
		wf.Nodes = append(wf.Nodes, workflow.Node{ID: id, Type: "switch"})
		if i > 0 {
			wf.Edges = append(wf.Edges, workflow.Edge{From: hostileIDs[i-1], To: id, When: hostileIDs[len(hostileIDs)-i]})
		}
	}
	wf.StartNodes = []workflow.StartNode{{Name: hostileIDs[1], Source: "manual", EntryNode: hostileIDs[0]}}
	return wf
}

// mermaidLine is every line shape the Mermaid renderer writes: hostile
// text must never add another.
var mermaidLine = regexp.MustCompile(`^(%% workflow ".*" \(kiln graph\)` +
	`|flowchart TD` +
	`|\s*[en]\d+(_c\d+)?(\(\[|\[/|\(|\{\{|\[\[|\[|\{)"[^"]*"(\]\)|/\]|\)|\}\}|\]\]|\]|\})` +
	`|\s*[en]\d+ (-->|-\.->|-\.-o)(\|"[^"|]*"\|)? [nc]\d+(_c\d+)?` +
	`|\s*subgraph c\d+\["[^"]*"\]|\s*end` +
	`|  classDef \w+ [^"]+|  class [a-z0-9_,]+ \w+|  linkStyle [0-9,]+ .*)$`)

func TestHostileText(t *testing.T) {
	g, err := graph.Build(hostile(), graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(g.Mermaid(), "\n"), "\n") {
		if !mermaidLine.MatchString(line) {
			t.Errorf("mermaid line breaks out of its shape: %q", line)
		}
	}
	for _, bad := range []string{"<script", "\u202e", "%%{", "\r"} {
		if strings.Contains(g.Mermaid(), bad) {
			t.Errorf("mermaid contains %q raw", bad)
		}
	}
	d := g.DOT()
	// DOT: every statement line is a generated node, edge or attribute.
	dotLine := regexp.MustCompile(`^(digraph "([^"\\]|\\.)*" \{|\s*(graph|node|edge) \[.*\];|\s*[en]\d+ \[label="([^"\\]|\\.)*", .*\];|\s*[en]\d+ -> n\d+( \[.*\])?;|\})$`)
	for _, line := range strings.Split(strings.TrimSuffix(d, "\n"), "\n") {
		if !dotLine.MatchString(line) {
			t.Errorf("dot line breaks out of its shape: %q", line)
		}
	}
	if strings.Contains(d, "\u202e") || strings.Contains(d, "\xff") {
		t.Error("dot carries an invisible or invalid character")
	}
	doc, err := g.SVG()
	if err != nil {
		t.Fatal(err)
	}
	root := parseSVG(t, doc)
	if s := root.find(func(e *svgElem) bool { return e.XMLName.Local == "script" }); len(s) > 0 {
		t.Error("SVG has a script element")
	}
	nodes := groups(root, "node")
	if len(nodes) != len(hostileIDs) || len(groups(root, "edge")) != len(hostileIDs)-1 {
		t.Fatalf("SVG: %d node groups, %d edge groups", len(nodes), len(groups(root, "edge")))
	}
	// Each node's data-node is its id (made visible), so the text
	// survived as text.
	for i, n := range nodes {
		if got := n.attr("data-node"); got != graph.Visible(hostileIDs[i]) {
			t.Errorf("data-node %q, want %q", got, graph.Visible(hostileIDs[i]))
		}
		if !regexp.MustCompile(`^node-[A-Za-z0-9._]+$`).MatchString(n.attr("id")) {
			t.Errorf("element id %q has unsafe characters", n.attr("id"))
		}
	}
	if bytes.Contains(doc, []byte("\u202e")) {
		t.Error("SVG carries a bidi override")
	}
	if dot := testtool.Command(t, "dot"); dot != "" {
		root := parseSVG(t, runDot(t, dot, d))
		if n := len(groups(root, "node")); n != len(hostileIDs)+1 {
			t.Errorf("dot drew %d nodes, want %d: hostile text added or removed nodes", n, len(hostileIDs)+1)
		}
	}
}

func TestElementIDsInjective(t *testing.T) {
	seen := map[string]string{}
	for _, pair := range [][2]string{{"a-b", "c"}, {"a", "b-c"}, {"a_2d", "b"}, {"a-", "b"}, {"a", "-b"}, {"a.b", "c"}, {"a/b", "c"}} {
		id := graph.EdgeElementID(pair[0], pair[1])
		if prev, dup := seen[id]; dup {
			t.Errorf("%v and %s share element id %q", pair, prev, id)
		}
		seen[id] = pair[0] + "|" + pair[1]
	}
}

func TestBuildRefuses(t *testing.T) {
	if _, err := graph.Build(nil, graph.Options{}); err == nil {
		t.Error("nil workflow accepted")
	}
	dup := &workflow.Workflow{Name: "d", Nodes: []workflow.Node{{ID: "a", Type: "merge"}, {ID: "a", Type: "merge"}}}
	if _, err := graph.Build(dup, graph.Options{}); err == nil {
		t.Error("duplicate node id accepted")
	}
	dangling := &workflow.Workflow{Name: "d", Nodes: []workflow.Node{{ID: "a", Type: "merge"}}, Edges: []workflow.Edge{{From: "a", To: "b"}}}
	if _, err := graph.Build(dangling, graph.Options{}); err == nil {
		t.Error("dangling edge accepted")
	}
	if _, err := graph.Build(dup, graph.Options{Depth: -1}); err == nil {
		t.Error("negative depth accepted")
	}
}

// TestBounded: a wide tree of children draws at most MaxNodes boxes (the
// rest is linked by file name), and a cycle of plain edges, which only an
// unvalidated workflow has, still lays out.
func TestBounded(t *testing.T) {
	leaf := &workflow.Workflow{Name: "leaf"}
	for i := 0; i < 50; i++ {
		leaf.Nodes = append(leaf.Nodes, workflow.Node{ID: "l" + strings.Repeat("x", i), Type: "merge"})
	}
	mid := &workflow.Workflow{Name: "mid", Children: map[string]*workflow.Workflow{"leaf.toml": leaf}}
	par := workflow.Node{ID: "fan", Type: "parallel"}
	for i := 0; i < 20; i++ {
		par.Branches = append(par.Branches, workflow.Branch{Workflow: "leaf.toml"})
	}
	mid.Nodes = []workflow.Node{par}
	top := &workflow.Workflow{Name: "top", Children: map[string]*workflow.Workflow{"mid.toml": mid}}
	call := workflow.Node{ID: "wide", Type: "parallel"}
	for i := 0; i < 20; i++ {
		call.Branches = append(call.Branches, workflow.Branch{Workflow: "mid.toml"})
	}
	top.Nodes = []workflow.Node{call}
	g, err := graph.Build(top, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	drawn, linked := len(g.Nodes()), 0
	for _, n := range g.Nodes() {
		for _, ch := range n.Children {
			if ch.Cluster == nil {
				linked++
			}
		}
	}
	if drawn > graph.MaxNodes || linked == 0 {
		t.Errorf("drew %d nodes (bound %d), linked %d children; 20*20*50 = 20000 were asked for", drawn, graph.MaxNodes, linked)
	}
	if _, err := g.SVG(); err != nil {
		t.Fatal(err)
	}

	cyclic := &workflow.Workflow{Name: "cyclic",
		Nodes: []workflow.Node{{ID: "a", Type: "merge"}, {ID: "b", Type: "merge"}, {ID: "c", Type: "merge"}},
		Edges: []workflow.Edge{{From: "a", To: "b"}, {From: "b", To: "c"}, {From: "c", To: "a"}, {From: "a", To: "a"}}}
	g, err = graph.Build(cyclic, graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := g.SVG()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(groups(parseSVG(t, doc), "edge")); n != 4 {
		t.Errorf("cyclic: %d edge groups, want 4", n)
	}
}
