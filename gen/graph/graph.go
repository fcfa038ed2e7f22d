// Package graph draws a loaded workflow: one model (Build) rendered as
// Mermaid (the format code hosts render in Markdown), Graphviz DOT and a
// self-contained SVG laid out in process. It is used by `kiln graph`, the
// generated package's doc comment, the run timeline page and the `kiln
// draft` review summary (docs/graph.md).
//
// Node ids and `when` labels are user input: every renderer escapes them
// for its format, and never uses them as identifiers of that format.
package graph

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Category groups node kinds for the shape of their box.
type Category string

const (
	Input        Category = "input"        // reads the outside world
	Transform    Category = "transform"    // pure data work
	Intelligence Category = "intelligence" // model calls
	Action       Category = "action"       // changes or calls the outside world
	Control      Category = "control"      // branches, ends, child workflows
)

// CategoryOf is the one place that derives a kind's category, from its
// family's declaration: control and compose are control, data is
// transform, llm is intelligence; of the rest, a kind whose policy gate
// only reads (fs.read, env.read, mcp.resource) is input and everything
// else is an action. An unknown kind is an action, the category that
// claims the least.
func CategoryOf(kind string) Category {
	k, ok := all.Kind(kind)
	if !ok {
		return Action
	}
	switch k.Family {
	case "control", "compose":
		return Control
	case "data":
		return Transform
	case "llm":
		return Intelligence
	}
	if strings.HasSuffix(k.Policy, ".read") || k.Policy == "mcp.resource" {
		return Input
	}
	return Action
}

// AllLevels draws every level of child workflows (Options.Depth).
const AllLevels = 0

// MaxNodes bounds the boxes one graph draws: a child workflow that would
// take the drawing past it is linked instead of drawn, so a wide tree of
// parallel children cannot make a drawing of unbounded size.
const MaxNodes = 2000

// Options tunes Build.
type Options struct {
	// Depth is how many levels of workflows are drawn: 1 draws only the
	// top workflow (call, parallel and map children are named, not
	// drawn), 2 also draws its children as subgraphs, and so on.
	// AllLevels (0) draws every level.
	Depth int
	// Path highlights one run of the top workflow (nil: none).
	Path *Path
	// DeadEnds finds the nodes of one workflow where a run can dead-end
	// (node id to reason). nil uses MinimalDeadEnds; callers that can
	// import package gen pass the lint's own analysis.
	DeadEnds func(w *workflow.Workflow) map[string]string
}

// Path is one run's way through the top workflow.
type Path struct {
	// Nodes are the node ids the run visited, in order (a node may repeat
	// in a loop).
	Nodes []string
	// Branches, when set, are the branch labels the nodes of Nodes took
	// ("" none; the trace's branch of each entry), one per node, so the
	// edges taken are told apart when several join the same two nodes.
	Branches []string
	// Edges are the edges the run took. nil takes each consecutive pair
	// of Nodes (with its branch, when Branches is set).
	Edges []Step
	// Failed is the node the run failed at ("" none).
	Failed string
}

// Step is one taken edge.
type Step struct {
	From, To string
	// When is the branch taken; "" matches an edge of any label between
	// From and To.
	When string
}

// Graph is a drawable workflow.
type Graph struct {
	Name string
	Root *Cluster

	// numbering of drawn elements by sort (nodes, clusters, entries), in
	// model order
	nodes, clusters, entries int
}

// Cluster is one workflow drawn: the top one, or a child under a node.
type Cluster struct {
	// Key is unique in the graph: "" for the top workflow, else the
	// parent node's key and the child's position.
	Key     string
	Label   string // workflow name (and file for a child)
	Nodes   []*Node
	Edges   []*Edge
	Entries []*Entry // top workflow only

	num int
}

// Node is one [[nodes]] entry.
type Node struct {
	// Key is unique in the graph: the node id, prefixed by the key of
	// the cluster for a child workflow's node.
	Key      string
	ID       string
	Kind     string
	Category Category
	// DeadEnd says why a run can end here without a final node ("" it
	// cannot, as far as the analysis knows).
	DeadEnd string
	// Visited and Failed come from Options.Path.
	Visited bool
	Failed  bool
	// Children are the child workflows of a call, parallel or map node.
	Children []*Child

	num int
}

// Child is one child workflow a node runs.
type Child struct {
	Label string // "calls", "branch 1", "each item"
	File  string // the workflow path as the node declares it
	// Cluster is the drawn child; nil when it is linked only (Depth or
	// MaxNodes).
	Cluster *Cluster
	// Entry is the child's entry node in Cluster (nil when not drawn or
	// unknown).
	Entry *Node
}

// Edge is one [[edges]] entry.
type Edge struct {
	From, To *Node
	When     string
	// MaxIterations > 0 marks a bounded loop edge.
	MaxIterations int
	Taken         bool
}

// Entry is a way a run starts: a start node with its sources (routes,
// triggers or manual).
type Entry struct {
	Key   string
	Name  string   // the start node's name; "" for the default start
	Lines []string // source lines: "POST /hook", "cron 0 5 * * *", "manual"
	To    *Node    // nil when the entry cannot be resolved

	num int
}

// Build makes the drawable graph of a loaded workflow.
func Build(wf *workflow.Workflow, opts Options) (*Graph, error) {
	if wf == nil {
		return nil, errors.New("graph: no workflow")
	}
	if opts.Depth < 0 {
		return nil, fmt.Errorf("graph: depth must be at least 0 (0 draws every level), got %d", opts.Depth)
	}
	if opts.DeadEnds == nil {
		opts.DeadEnds = MinimalDeadEnds
	}
	b := &builder{opts: opts, g: &Graph{Name: wf.Name}}
	root, err := b.cluster(wf, "", wf.Name, 1)
	if err != nil {
		return nil, err
	}
	b.g.Root = root
	if err := b.entries(wf, root); err != nil {
		return nil, err
	}
	if opts.Path != nil {
		if err := applyPath(root, opts.Path); err != nil {
			return nil, err
		}
	}
	return b.g, nil
}

type builder struct {
	opts  Options
	g     *Graph
	nodes int
}

func next(counter *int) int { *counter++; return *counter - 1 }

// cluster draws workflow w (at level, 1 = top) under key.
func (b *builder) cluster(w *workflow.Workflow, key, label string, level int) (*Cluster, error) {
	c := &Cluster{Key: key, Label: label, num: next(&b.g.clusters)}
	byID := map[string]*Node{}
	deadEnds := b.opts.DeadEnds(w)
	for _, wn := range w.Nodes {
		if _, dup := byID[wn.ID]; dup {
			return nil, fmt.Errorf("graph: workflow %q: node id %q is declared twice", w.Name, wn.ID)
		}
		b.nodes++
		n := &Node{Key: key + wn.ID, ID: wn.ID, Kind: wn.Type, Category: CategoryOf(wn.Type),
			DeadEnd: deadEnds[wn.ID], num: next(&b.g.nodes)}
		byID[wn.ID] = n
		c.Nodes = append(c.Nodes, n)
	}
	for i, e := range w.Edges {
		from, to := byID[e.From], byID[e.To]
		if from == nil || to == nil {
			return nil, fmt.Errorf("graph: workflow %q: edge %d (%q -> %q) names an undeclared node", w.Name, i, e.From, e.To)
		}
		ed := &Edge{From: from, To: to, When: e.When}
		if e.MaxIterations != nil {
			ed.MaxIterations = max(*e.MaxIterations, 1)
		}
		c.Edges = append(c.Edges, ed)
	}
	// Children after every node of this level, so numbering is by level
	// first and a child's size cannot shift its parent's numbers.
	for i := range w.Nodes {
		if err := b.children(w, &w.Nodes[i], c.Nodes[i], level); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// children adds the child workflows of node wn: drawn while the depth and
// the node budget allow, else linked by file name.
func (b *builder) children(w *workflow.Workflow, wn *workflow.Node, n *Node, level int) error {
	k, ok := all.Kind(wn.Type)
	if !ok || k.Children == nil {
		return nil
	}
	list := k.Children(wn)
	for i, sc := range list {
		ch := &Child{File: sc.Path, Label: childLabel(wn.Type, i, len(list))}
		n.Children = append(n.Children, ch)
		cw := w.Children[sc.Path]
		if cw == nil || (b.opts.Depth != AllLevels && level >= b.opts.Depth) || b.nodes+len(cw.Nodes) > MaxNodes {
			continue
		}
		key := fmt.Sprintf("%s/%d/", n.Key, i)
		cc, err := b.cluster(cw, key, fmt.Sprintf("%s (%s)", cw.Name, sc.Path), level+1)
		if err != nil {
			return err
		}
		ch.Cluster = cc
		if id, ok := entryOf(cw, sc.Start); ok {
			ch.Entry = nodeByID(cc, id)
		}
	}
	return nil
}

func childLabel(kind string, i, n int) string {
	switch {
	case kind == "map":
		return "each item"
	case kind == "parallel" && n > 1:
		return fmt.Sprintf("branch %d", i+1)
	case kind == "parallel":
		return "branch"
	}
	return "calls"
}

func nodeByID(c *Cluster, id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// entryOf resolves a start name to its entry node as the engine does: a
// start node's entry_node, else a node id of that name, else the single
// node without plain in-edges.
func entryOf(w *workflow.Workflow, start string) (string, bool) {
	found := false
	for _, s := range w.StartNodes {
		if start == "" || s.Name == start {
			found = true
			if s.EntryNode != "" {
				return s.EntryNode, true
			}
			break
		}
	}
	if start != "" && !found {
		for _, n := range w.Nodes {
			if n.ID == start {
				return start, true
			}
		}
		return "", false
	}
	in := map[string]bool{}
	for _, e := range w.Edges {
		if e.MaxIterations == nil {
			in[e.To] = true
		}
	}
	var roots []string
	for _, n := range w.Nodes {
		if !in[n.ID] {
			roots = append(roots, n.ID)
		}
	}
	if len(roots) == 1 {
		return roots[0], true
	}
	return "", false
}

// entries adds the top workflow's entry markers: one per start node with
// the routes and triggers that name it; a route or trigger naming a node
// id directly gets its own; a workflow without start nodes gets one
// manual entry.
func (b *builder) entries(w *workflow.Workflow, c *Cluster) error {
	lines := map[string][]string{}
	var direct []string // start_node values that name no start node, in order
	declared := map[string]bool{}
	for _, s := range w.StartNodes {
		declared[s.Name] = true
	}
	add := func(start, line string) {
		if !declared[start] {
			if _, seen := lines[start]; !seen {
				direct = append(direct, start)
			}
		}
		lines[start] = append(lines[start], line)
	}
	for _, r := range w.HTTPRoutes {
		add(r.StartNode, strings.TrimSpace(r.Method+" "+r.Path))
	}
	for _, t := range w.Triggers {
		add(t.StartNode, triggerLine(t))
	}
	for _, s := range w.StartNodes {
		e := &Entry{Key: "start:" + s.Name, Name: s.Name, Lines: lines[s.Name], num: next(&b.g.entries)}
		if len(e.Lines) == 0 {
			e.Lines = []string{s.Source}
		}
		if id, ok := entryOf(w, s.Name); ok {
			e.To = nodeByID(c, id)
		}
		c.Entries = append(c.Entries, e)
	}
	for _, start := range direct {
		e := &Entry{Key: "start:" + start, Name: start, Lines: lines[start], num: next(&b.g.entries)}
		if id, ok := entryOf(w, start); ok {
			e.To = nodeByID(c, id)
		}
		c.Entries = append(c.Entries, e)
	}
	if len(c.Entries) == 0 {
		e := &Entry{Key: "start:", Lines: []string{"manual"}, num: next(&b.g.entries)}
		if id, ok := entryOf(w, ""); ok {
			e.To = nodeByID(c, id)
		}
		c.Entries = append(c.Entries, e)
	}
	return nil
}

func triggerLine(t workflow.Trigger) string {
	var arg string
	switch t.Type {
	case "cron":
		arg = t.Schedule
	case "interval":
		arg = "every " + t.Every
	case "fs_watch":
		arg = t.Path
	case "internal.event":
		arg = t.Name
	case "mcp.resource.updated", "mcp.resource.created":
		arg = t.Server + " " + t.Resource
	}
	return strings.TrimSpace(t.Type + " " + arg)
}

// applyPath marks the visited nodes, taken edges and failed node of the
// top workflow. A node or edge the workflow does not have is an error:
// a path from another version of the workflow must not be drawn as if it
// were this one's.
func applyPath(c *Cluster, p *Path) error {
	for _, id := range p.Nodes {
		n := nodeByID(c, id)
		if n == nil {
			return fmt.Errorf("graph: run path: node %q is not in workflow %q", id, c.Label)
		}
		n.Visited = true
	}
	if p.Failed != "" {
		n := nodeByID(c, p.Failed)
		if n == nil {
			return fmt.Errorf("graph: run path: failed node %q is not in workflow %q", p.Failed, c.Label)
		}
		n.Visited, n.Failed = true, true
	}
	if p.Branches != nil && len(p.Branches) != len(p.Nodes) {
		return fmt.Errorf("graph: run path: %d branches for %d nodes", len(p.Branches), len(p.Nodes))
	}
	steps := p.Edges
	exact := p.Branches != nil
	if steps == nil {
		for i := 1; i < len(p.Nodes); i++ {
			s := Step{From: p.Nodes[i-1], To: p.Nodes[i]}
			if exact {
				s.When = p.Branches[i-1]
			}
			steps = append(steps, s)
		}
	} else {
		exact = false
	}
	for _, s := range steps {
		found := false
		for _, e := range c.Edges {
			if e.From.ID == s.From && e.To.ID == s.To && (e.When == s.When || (!exact && s.When == "")) {
				e.Taken, found = true, true
			}
		}
		if !found {
			return fmt.Errorf("graph: run path: workflow %q has no edge %q -> %q", c.Label, s.From, s.To)
		}
	}
	return nil
}

// walk visits every cluster of the graph, parents before children, in
// model order.
func (g *Graph) walk(fn func(c *Cluster)) {
	var visit func(c *Cluster)
	visit = func(c *Cluster) {
		fn(c)
		for _, n := range c.Nodes {
			for _, ch := range n.Children {
				if ch.Cluster != nil {
					visit(ch.Cluster)
				}
			}
		}
	}
	visit(g.Root)
}

// Nodes returns every drawn node, in model order.
func (g *Graph) Nodes() []*Node {
	var out []*Node
	g.walk(func(c *Cluster) { out = append(out, c.Nodes...) })
	return out
}

// Edges returns every drawn edge, in model order.
func (g *Graph) Edges() []*Edge {
	var out []*Edge
	g.walk(func(c *Cluster) { out = append(out, c.Edges...) })
	return out
}

// nodeLabel is the text of a node's box: id, kind, and a dead-end mark.
func nodeLines(n *Node) []string {
	lines := []string{n.ID, n.Kind}
	if n.DeadEnd != "" {
		lines = append(lines, "can dead-end")
	}
	return lines
}

// edgeLabel is an edge's text: its `when`, and a loop edge's bound.
func edgeLabel(e *Edge) string {
	if e.MaxIterations == 0 {
		return e.When
	}
	loop := fmt.Sprintf("loop ≤%d", e.MaxIterations)
	if e.When == "" {
		return loop
	}
	return e.When + " · " + loop
}

// childLines is the text of a child reference: its label and file, and
// why it is not drawn.
func childText(ch *Child) string {
	if ch.Cluster != nil {
		return ch.Label
	}
	return ch.Label + " " + ch.File
}
