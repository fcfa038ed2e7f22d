package gen

import (
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
)

// outKey groups a node's out-edges by branch label.
type outKey struct{ from, when string }

var startSources = map[string]bool{"manual": true, "http": true, "event": true}

func (c *checker) checkStartNodes() {
	seen := map[string]bool{}
	for i, s := range c.wf.StartNodes {
		var is spec.Issues
		where := is.Entry("start_nodes", "start node", i, s.Name, seen, "duplicate_start_node")
		c.issues = append(c.issues, is...)
		switch {
		case s.Source == "":
			c.add("missing_field", "%s: source is required (manual, http or event)", where)
		case !startSources[s.Source]:
			c.add("invalid_start_source", "%s: source %q must be manual, http or event", where, s.Source)
		}
		if s.EntryNode != "" && c.nodes[s.EntryNode] == nil {
			c.add("unknown_entry_node", "%s: entry_node %q is not a declared node", where, s.EntryNode)
		}
	}
}

// checkGraph checks edges and the shape of the graph: dangling and
// duplicate edges, ambiguous out-edges, cycles other than loop edges,
// entries, reachability and approval gates.
func (c *checker) checkGraph() {
	type edgeKey struct{ from, to, when string }
	seen := map[edgeKey]bool{}
	out := map[outKey][]string{}   // plain-edge targets per (from, when)
	loops := map[outKey][]string{} // loop-edge targets per (from, when)
	var outOrder []outKey
	succ := map[string][]string{} // all valid edges, for reachability
	dag := map[string][]string{}  // non-loop edges, for cycles and roots
	inDegree := map[string]int{}
	for i, e := range c.wf.Edges {
		where := fmt.Sprintf("edge %d (%s -> %s)", i, e.From, e.To)
		ok := true
		for _, end := range []struct{ key, id string }{{"from", e.From}, {"to", e.To}} {
			switch {
			case end.id == "":
				c.add("missing_field", "%s: %s is required", where, end.key)
				ok = false
			case c.nodes[end.id] == nil:
				c.add("dangling_edge", "%s: %s %q is not a declared node", where, end.key, end.id)
				ok = false
			}
		}
		if e.MaxIterations != nil && *e.MaxIterations < 1 {
			c.add("invalid_loop_edge", "%s: max_iterations must be at least 1, got %d", where, *e.MaxIterations)
		}
		if !ok {
			continue
		}
		k := edgeKey{e.From, e.To, e.When}
		if seen[k] {
			c.add("duplicate_edge", "%s: the same edge is declared more than once", where)
			continue
		}
		seen[k] = true
		ok2 := outKey{e.From, e.When}
		succ[e.From] = append(succ[e.From], e.To)
		if e.MaxIterations != nil {
			// A loop edge may share its label with one plain edge: the
			// engine follows the loop while it has budget, then the plain
			// edge (docs/reference.md, Edges). Two loop edges on one label
			// would be ambiguous.
			loops[ok2] = append(loops[ok2], e.To)
			if len(loops[ok2]) == 2 {
				c.add("ambiguous_branch_edges", "%s: %d loop edges for when = %q (to %s); at most one may fire",
					nodeLabel(c.nodes[e.From]), len(loops[ok2]), e.When, strings.Join(loops[ok2], ", "))
			}
			continue
		}
		if _, ok := out[ok2]; !ok {
			outOrder = append(outOrder, ok2)
		}
		out[ok2] = append(out[ok2], e.To)
		dag[e.From] = append(dag[e.From], e.To)
		inDegree[e.To]++
	}
	for _, k := range outOrder {
		targets := out[k]
		if len(targets) < 2 {
			continue
		}
		n := c.nodes[k.from]
		if k.when == "" {
			c.add("multiple_unconditional_edges", "%s: %d out-edges without `when` (to %s); at most one may fire",
				nodeLabel(n), len(targets), strings.Join(targets, ", "))
		} else {
			c.add("ambiguous_branch_edges", "%s: %d out-edges for when = %q (to %s); at most one may fire",
				nodeLabel(n), len(targets), k.when, strings.Join(targets, ", "))
		}
	}
	cyclic := c.checkCycles(dag)
	c.checkEntries(inDegree, succ, cyclic)
	c.checkApprovals(out)
}

// checkCycles reports every strongly connected component of the non-loop
// edges (Tarjan); only max_iterations edges may close a cycle.
func (c *checker) checkCycles(dag map[string][]string) bool {
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next := 0
	found := false
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		selfLoop := false
		for _, w := range dag[v] {
			if w == v {
				selfLoop = true
			}
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > 1 || selfLoop {
			found = true
			c.add("cycle", "nodes %s form a cycle; only an edge with max_iterations (a bounded loop edge) may close one",
				strings.Join(c.inDeclOrder(comp), ", "))
		}
	}
	for _, n := range c.wf.Nodes {
		if _, seen := index[n.ID]; !seen && c.nodes[n.ID] != nil {
			visit(n.ID)
		}
	}
	return found
}

// inDeclOrder sorts node ids by declaration order.
func (c *checker) inDeclOrder(ids []string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	for _, n := range c.wf.Nodes {
		if want[n.ID] {
			out = append(out, n.ID)
			delete(want, n.ID)
		}
	}
	return out
}

// checkEntries finds each start's entry node, reports ambiguous entries,
// and reports nodes no entry reaches.
func (c *checker) checkEntries(inDegree map[string]int, succ map[string][]string, cyclic bool) {
	var roots []string
	for _, n := range c.wf.Nodes {
		if c.nodes[n.ID] != nil && inDegree[n.ID] == 0 && !contains(roots, n.ID) {
			roots = append(roots, n.ID)
		}
	}
	var entries []string
	needRoot := len(c.wf.StartNodes) == 0
	unknownEntry := false
	for _, s := range c.wf.StartNodes {
		switch {
		case s.EntryNode == "":
			needRoot = true
		case c.nodes[s.EntryNode] == nil:
			unknownEntry = true // reported as unknown_entry_node
		default:
			entries = append(entries, s.EntryNode)
		}
	}
	if needRoot && len(c.wf.Nodes) > 0 {
		switch {
		case len(roots) > 1:
			c.add("ambiguous_entry", "%d nodes have no in-edges (%s) and no entry_node picks one; set entry_node on the start node",
				len(roots), strings.Join(roots, ", "))
		case len(roots) == 0 && !cyclic:
			c.add("ambiguous_entry", "every node has an in-edge, so there is no entry node; set entry_node on the start node")
		}
		// Every root counts as an entry, so one missing entry_node does
		// not also flag every other root unreachable.
		entries = append(entries, roots...)
	} else if unknownEntry {
		entries = append(entries, roots...) // do not cascade into unreachable_node
	}
	if cyclic && len(entries) == 0 {
		return // reachability says nothing useful until the cycle is fixed
	}
	reached := map[string]bool{}
	queue := append([]string(nil), entries...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if reached[id] {
			continue
		}
		reached[id] = true
		queue = append(queue, succ[id]...)
	}
	for _, n := range c.wf.Nodes {
		if c.nodes[n.ID] != nil && !reached[n.ID] {
			c.add("unreachable_node", "%s: no start node or entry reaches it", nodeLabel(&n))
			reached[n.ID] = true // report a duplicated id once
		}
	}
}

// checkApprovals: a pause_for_approval resumes at its single successor,
// so it needs exactly one out-edge, without `when`.
func (c *checker) checkApprovals(out map[outKey][]string) {
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		if n.Type != "pause_for_approval" || c.nodes[n.ID] != n {
			continue
		}
		unconditional := len(out[outKey{n.ID, ""}])
		labeled := 0
		for k, targets := range out {
			if k.from == n.ID && k.when != "" {
				labeled += len(targets)
			}
		}
		switch {
		case labeled > 0:
			c.add("approval_successor", "%s: out-edges with `when` never fire after an approval; resume continues at one unconditional successor", nodeLabel(n))
		case unconditional != 1:
			c.add("approval_successor", "%s: needs exactly one unconditional successor to resume at, has %d", nodeLabel(n), unconditional)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
