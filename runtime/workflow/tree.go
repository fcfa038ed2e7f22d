package workflow

import (
	"maps"
	"slices"
)

// Tree lists wf and every workflow below it (call, parallel and map
// children, at any depth), each once, depth first with children in the
// order of their declared paths: the one order everything that walks a
// workflow tree (loader, generator, needs, preflight, seal check) uses.
func Tree(wf *Workflow) []*Workflow {
	var out []*Workflow
	seen := map[*Workflow]bool{}
	var visit func(*Workflow)
	visit = func(w *Workflow) {
		if w == nil || seen[w] {
			return
		}
		seen[w] = true
		out = append(out, w)
		for _, path := range slices.Sorted(maps.Keys(w.Children)) {
			visit(w.Children[path])
		}
	}
	visit(wf)
	return out
}
