// Package spec declares the compose family's node kinds: call, parallel
// and map (see docs/reference.md). It holds data and checks only, so the
// generator links it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DefaultMaxConcurrent is how many map children run at once when
// max_concurrent is unset.
const DefaultMaxConcurrent = 4

// Family is the compose family's declaration.
var Family = spec.Family{
	ID: "compose",
	Kinds: []spec.Kind{
		{
			Name: "call",
			Doc: "Runs a child workflow on the parent's engine, policy, budgets and deadline, one nesting level deeper. A child that fails or times out " +
				"takes the error branch; an engine error inside it (policy denial, tool error, nested pause) aborts the parent.",
			Keys: []spec.Key{
				{Name: "workflow", Type: spec.String, Required: true, Doc: "the child workflow file, relative to this one"},
				{Name: "input_from", Type: spec.Path, Doc: "the child's trigger payload (default: a copy of this run's)"},
				{Name: "start", Type: spec.String, Doc: "a start node (or node id) of the child"},
			},
			Limits:   []string{"child workflows nest at most 8 levels"},
			Check:    CheckCall,
			Output:   "{result} (completed) or {error}",
			Branches: []string{"error"},
			Children: func(n *workflow.Node) []spec.Child { return []spec.Child{{Path: n.Workflow, Start: n.Start}} },
		},
		{
			Name: "parallel",
			Doc:  "Runs several child workflows at once and collects their results in declared order. Children made only of nodes that never wait (control and data kinds, no retries) run one after another while they are quick, as concurrency would only cost them.",
			Keys: []spec.Key{{Name: "branches", Type: spec.Tables, Required: true,
				Doc: "one {workflow, input_from, start} table per child"}},
			Limits:   []string{"child workflows nest at most 8 levels"},
			Check:    CheckParallel,
			Output:   "{results: [{result} | {error}], ok}",
			Branches: []string{"error"},
			Children: func(n *workflow.Node) []spec.Child {
				out := make([]spec.Child, len(n.Branches))
				for i, b := range n.Branches {
					out[i] = spec.Child{Path: b.Workflow, Start: b.Start}
				}
				return out
			},
		},
		{
			Name: "map",
			Doc:  "Runs a child workflow once per item of an array, at most max_concurrent at a time (a worker starts the next item as soon as it finishes one), and collects the results in item order. Children made only of nodes that never wait (control and data kinds, no retries) run one after another until they have run for 50 µs, then on no more workers than the process has threads. More items than max_items is an error: map never truncates.",
			Keys: []spec.Key{
				{Name: "items_from", Type: spec.Path, Required: true, Doc: "the items, a JSON array"},
				{Name: "workflow", Type: spec.String, Required: true, Doc: "the child workflow file"},
				{Name: "max_items", Type: spec.Int, Required: true, Doc: "the most items a run may map"},
				{Name: "max_concurrent", Type: spec.Int, Default: "4", Doc: "children run at once"},
				{Name: "start", Type: spec.String, Doc: "a start node (or node id) of the child"},
			},
			Limits:   []string{"max_items >= 1", "max_concurrent >= 1", "child workflows nest at most 8 levels"},
			Check:    CheckMap,
			Output:   "{results: [{result} | {error}], ok}",
			Branches: []string{"error"},
			Children: func(n *workflow.Node) []spec.Child { return []spec.Child{{Path: n.Workflow, Start: n.Start}} },
		},
	},
}

// CheckCall checks a call node.
func CheckCall(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("workflow", n.Workflow != "")
	return append(is, child(ctx, n.Workflow, n.Start)...)
}

// CheckParallel checks a parallel node.
func CheckParallel(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("branches", len(n.Branches) > 0)
	for j, b := range n.Branches {
		if b.Workflow == "" {
			is.Add("missing_field", "branches[%d].workflow is required", j)
		}
		if b.InputFrom != "" && !spec.ValidPath(b.InputFrom) {
			is.Add("invalid_context_path", "branches[%d].input_from %q is not a dotted path", j, b.InputFrom)
		}
		is = append(is, child(ctx, b.Workflow, b.Start)...)
	}
	return is
}

// CheckMap checks a map node.
func CheckMap(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("items_from", n.ItemsFrom != "")
	is.Require("workflow", n.Workflow != "")
	is.Require("max_items", n.MaxItems != nil)
	if n.MaxItems != nil && *n.MaxItems < 1 {
		is.Add("map_bounds", "max_items must be at least 1, got %d", *n.MaxItems)
	}
	if n.MaxConcurrent != nil && *n.MaxConcurrent < 1 {
		is.Add("map_bounds", "max_concurrent must be at least 1, got %d", *n.MaxConcurrent)
	}
	return append(is, child(ctx, n.Workflow, n.Start)...)
}

// child checks a declared child workflow; a missing path is reported as
// missing_field already.
func child(ctx spec.Context, path, start string) []spec.Issue {
	if path == "" {
		return nil
	}
	return ctx.Child(path, start)
}
