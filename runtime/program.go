package runtime

import (
	"context"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Program is a workflow compiled for execution: handlers prepared, edges
// indexed, children compiled. It is immutable and shared by all runs.
type Program struct {
	Workflow *workflow.Workflow
	Policy   *policy.Policy
	Children map[string]*Program // by declared workflow path

	nodes    map[string]*programNode
	order    []string // node ids in declaration order
	inDegree map[string]int
	entries  map[string]string // start name -> entry node, see cacheEntries
	// defaultEntry is the entry node of DefaultStart (nil: none), where
	// most runs and every map item start: found once, not per run.
	defaultEntry *programNode
	// noWait: no node of the program waits (NodeKind.NoWait, and no
	// retry backoff), so a run of it only computes: RunChildren runs such
	// children on its calling goroutine until they have taken long.
	noWait bool
	// Extra is load-time state capability packages attach to a program
	// (compiled schemas, clients); keyed by the package's own key type.
	extra map[any]any
}

type programNode struct {
	node    *workflow.Node
	pos     int // in Program.order: where a run keeps the node's output
	handler NodeFunc
	out     []edge
	// valueModel: the kind returns value trees only (NodeKind.ValueModel).
	valueModel bool
}

type edge struct {
	index int // position in Workflow.Edges: loop counters are per edge
	to    string
	node  *programNode // the node `to` names
	when  string
	// label is when as a trace entry's branch, boxed once here rather
	// than on every step that takes a branch.
	label any
	loop  int // max_iterations; 0 = not a loop edge
}

// CompileOptions tunes Compile.
type CompileOptions struct {
	// AllowStubs runs node kinds with no registered handler as pass-through
	// stubs. Tests only: a real binary refuses them.
	AllowStubs bool
	// Unprovided lists node kinds a degraded build deliberately lacks; they
	// fail at dispatch with capability_not_provided instead of at load.
	Unprovided map[string]bool
}

// Compile prepares wf (already validated) for execution.
func Compile(wf *workflow.Workflow, opts CompileOptions) (*Program, error) {
	return compile(wf, opts, 0)
}

func compile(wf *workflow.Workflow, opts CompileOptions, depth int) (*Program, error) {
	if depth > MaxCallDepth {
		return nil, fmt.Errorf("workflow %q: child workflows nest deeper than %d", wf.Name, MaxCallDepth)
	}
	// [policy.rego] is prepared here, at start-up, never at a first request.
	pol, err := policy.Compile(wf.Policy, wf.Assets)
	if err != nil {
		return nil, fmt.Errorf("workflow %q: %w", wf.Name, err)
	}
	p := &Program{
		Workflow: wf,
		Policy:   pol,
		Children: map[string]*Program{},
		nodes:    map[string]*programNode{},
		inDegree: map[string]int{},
		extra:    map[any]any{},
	}
	for _, path := range SortedKeys(wf.Children) {
		child, err := compile(wf.Children[path], opts, depth+1)
		if err != nil {
			return nil, fmt.Errorf("child workflow %s: %w", path, err)
		}
		p.Children[path] = child
	}
	for i := range wf.Nodes {
		n := &wf.Nodes[i]
		p.nodes[n.ID] = &programNode{node: n, pos: len(p.order)}
		p.order = append(p.order, n.ID)
	}
	for i, e := range wf.Edges {
		from, ok := p.nodes[e.From]
		if !ok {
			return nil, fmt.Errorf("edge %d: unknown node %q", i, e.From)
		}
		to, ok := p.nodes[e.To]
		if !ok {
			return nil, fmt.Errorf("edge %d: unknown node %q", i, e.To)
		}
		ed := edge{index: i, to: e.To, node: to, when: e.When, label: e.When}
		if e.MaxIterations != nil {
			ed.loop = *e.MaxIterations
		} else {
			p.inDegree[e.To]++
		}
		from.out = append(from.out, ed)
	}
	missing := map[string][]string{} // kind -> node ids
	p.noWait = true
	for _, id := range p.order {
		pn := p.nodes[id]
		kind := pn.node.Type
		k, ok := LookupNode(kind)
		if !k.NoWait || pn.node.Retry != nil && pn.node.Retry.MaxAttempts > 1 {
			p.noWait = false
		}
		if opts.Unprovided[kind] {
			p.noWait = false
			pn.handler = unprovided(kind)
			continue
		}
		if !ok {
			if opts.AllowStubs {
				pn.handler = func(ctx context.Context, c *Call) (Result, error) { return Next(nil), nil }
				continue
			}
			missing[kind] = append(missing[kind], id)
			continue
		}
		h, err := k.Prepare(pn.node, p)
		if err != nil {
			return nil, fmt.Errorf("node %s (%s): %w", id, kind, err)
		}
		pn.handler = h
		pn.valueModel = k.ValueModel
	}
	if len(missing) > 0 {
		var parts []string
		for _, kind := range SortedKeys(missing) {
			parts = append(parts, fmt.Sprintf("%s (node %s)", kind, strings.Join(missing[kind], ", ")))
		}
		return nil, &Error{Class: ClassCapability, Msg: fmt.Sprintf(
			"workflow %q: capability not compiled in: no handler in this binary for node kind %s",
			wf.Name, strings.Join(parts, "; "))}
	}
	p.cacheEntries()
	return p, nil
}

func unprovided(kind string) NodeFunc {
	return func(ctx context.Context, c *Call) (Result, error) {
		return Result{}, c.Errorf(ClassCapability, "capability_not_provided: %s is not provided by this degraded build", kind)
	}
}

// Node returns a node declaration by id.
func (p *Program) Node(id string) (*workflow.Node, bool) {
	pn, ok := p.nodes[id]
	if !ok {
		return nil, false
	}
	return pn.node, true
}

// Child returns the compiled child workflow declared as path.
func (p *Program) Child(path string) (*Program, bool) {
	c, ok := p.Children[path]
	return c, ok
}

// SetExtra attaches load-time state for a capability package.
func (p *Program) SetExtra(key, v any) { p.extra[key] = v }

// Extra returns state attached with SetExtra.
func (p *Program) Extra(key any) (any, bool) { v, ok := p.extra[key]; return v, ok }

// Entry resolves the first node of a run started at start: the start
// node's entry_node, else the unique node without (non-loop) in-edges.
// An empty start picks the first declared start node, or the root.
func (p *Program) Entry(start string) (string, error) {
	if id, ok := p.entries[start]; ok {
		return id, nil
	}
	return p.entry(start)
}

// cacheEntries resolves the entry of every declared start node once, at
// compile time (programs are immutable), so runs skip the root search.
func (p *Program) cacheEntries() {
	p.entries = map[string]string{}
	names := []string{""}
	for _, s := range p.Workflow.StartNodes {
		names = append(names, s.Name)
	}
	for _, name := range names {
		if id, err := p.entry(name); err == nil {
			p.entries[name] = id
		}
	}
	if id, ok := p.entries[p.DefaultStart()]; ok {
		p.defaultEntry = p.nodes[id]
	}
}

func (p *Program) entry(start string) (string, error) {
	wf := p.Workflow
	if start != "" {
		found := false
		for _, s := range wf.StartNodes {
			if s.Name == start {
				found = true
				if s.EntryNode != "" {
					return s.EntryNode, nil
				}
			}
		}
		if !found {
			// Compatibility: a start name may also be a node id.
			if _, ok := p.nodes[start]; ok {
				return start, nil
			}
			return "", &Error{Class: ClassConfig, Msg: fmt.Sprintf("unknown start node %q", start)}
		}
	} else if len(wf.StartNodes) > 0 && wf.StartNodes[0].EntryNode != "" {
		return wf.StartNodes[0].EntryNode, nil
	}
	var roots []string
	for _, id := range p.order {
		if p.inDegree[id] == 0 {
			roots = append(roots, id)
		}
	}
	switch len(roots) {
	case 1:
		return roots[0], nil
	case 0:
		return "", &Error{Class: ClassWorkflow, Msg: "no entry node: every node has an in-edge"}
	}
	return "", &Error{Class: ClassWorkflow, Msg: fmt.Sprintf("ambiguous entry: %d root nodes (%s); set entry_node", len(roots), strings.Join(roots, ", "))}
}

// DefaultStart is the name of the first start node, or "".
func (p *Program) DefaultStart() string {
	if len(p.Workflow.StartNodes) > 0 {
		return p.Workflow.StartNodes[0].Name
	}
	return ""
}
