package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Warning is a lint finding: the workflow is valid, but something in it
// probably does not do what its author meant. `kiln check` lists warnings
// beside issues; `kiln check --strict` turns them into issues. Codes are in
// docs/validation-codes.md.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`

	node, reason string // the node warned about, and the message's own part
}

// Warning codes.
const (
	// A condition without an out-edge for "true" or for "false": a run
	// taking that branch dead-ends there and ends completed.
	WarnConditionBranch = "condition_branch_unhandled"
	// A switch on a value whose possible values are not known: any value
	// without an edge dead-ends the run, which ends completed.
	WarnSwitchValue = "switch_value_unhandled"
	// A switch on an llm_infer output whose schema has an enum: one
	// warning for each enum value without an edge.
	WarnSwitchEnum = "switch_enum_value_unhandled"
)

// Lint returns the warnings of a loaded, validated workflow and of its
// children, in a stable order.
func Lint(wf *workflow.Workflow) []Warning {
	var out []Warning
	for _, w := range workflow.Tree(wf) {
		out = append(out, lintOne(w)...)
	}
	return out
}

func lintOne(w *workflow.Workflow) []Warning {
	var out []Warning
	add := func(n *workflow.Node, code, format string, args ...any) {
		where := fmt.Sprintf("workflow %q", w.Name)
		if w.Source != "" {
			where = w.Source
		}
		reason := fmt.Sprintf(format, args...)
		out = append(out, Warning{Code: code, Message: where + ": " + nodeLabel(n) + ": " + reason, node: n.ID, reason: reason})
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Type != "condition" && n.Type != "switch" {
			continue
		}
		labels := branchLabels(w, n.ID)
		if n.Type == "condition" {
			for _, b := range []string{"true", "false"} {
				if !labels[b] {
					add(n, WarnConditionBranch, "no out-edge has when = %q, so a %s value of %s dead-ends the run here and it ends completed", b, b, n.Expr)
				}
			}
			continue
		}
		if values, schema, ok := enumValues(w, n.Expr); ok {
			for _, v := range values {
				if !labels[v] {
					add(n, WarnSwitchEnum, "%s can be %q (an enum value of %s) but no out-edge has when = %q, so that answer dead-ends the run here and it ends completed", n.Expr, v, schema, v)
				}
			}
			continue
		}
		handled := runtime.SortedKeys(labels)
		add(n, WarnSwitchValue, "%s can take any value, and a value other than %s matches no out-edge (a switch has no default), so the run dead-ends here and ends completed",
			n.Expr, quoteList(handled))
	}
	return out
}

// branchLabels is the set of `when` labels of the node's out-edges.
func branchLabels(w *workflow.Workflow, id string) map[string]bool {
	set := map[string]bool{}
	for _, e := range w.Edges {
		if e.From == id {
			set[e.When] = true
		}
	}
	return set
}

func quoteList(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// enumValues returns the branch labels an expression can take when it
// names a property of an llm_infer node's parsed output (NODE.parsed.a.b)
// whose output_schema declares an enum (or a const, or type boolean), in the string form a
// switch branches on. ok is false when the values are not known.
func enumValues(w *workflow.Workflow, expr string) (values []string, schemaFile string, ok bool) {
	parts := strings.Split(expr, ".")
	if len(parts) < 2 || parts[1] != "parsed" {
		return nil, "", false
	}
	var src *workflow.Node
	for i := range w.Nodes {
		if w.Nodes[i].ID == parts[0] {
			src = &w.Nodes[i]
		}
	}
	if src == nil || src.Type != "llm_infer" {
		return nil, "", false
	}
	raw, found := w.Assets[src.OutputSchema]
	if !found {
		return nil, "", false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their JSON text, as a switch label does
	var schema any
	if err := dec.Decode(&schema); err != nil {
		return nil, "", false
	}
	for _, p := range parts[2:] {
		obj, _ := schema.(map[string]any)
		props, _ := obj["properties"].(map[string]any)
		if schema, found = props[p]; !found {
			return nil, "", false
		}
	}
	obj, _ := schema.(map[string]any)
	var list []any
	if e, isList := obj["enum"].([]any); isList {
		list = e
	} else if c, isConst := obj["const"]; isConst {
		list = []any{c}
	} else if obj["type"] == "boolean" {
		list = []any{false, true}
	} else {
		return nil, "", false
	}
	seen := map[string]bool{}
	for _, v := range list {
		label := runtime.SwitchLabel(v)
		if !seen[label] {
			seen[label] = true
			values = append(values, label)
		}
	}
	sort.Strings(values)
	return values, src.OutputSchema, true
}
