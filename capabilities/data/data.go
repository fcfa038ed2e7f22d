// Package data is the capability family of the pure transformation nodes:
// parse_json (in package parsejson), json_select, template_render and
// diff_compute (docs/reference.md). They have no side effects and need no policy;
// dry-run runs them normally.
package data

import (
	"context"

	dataspec "github.com/kilnworks/kiln/capabilities/data/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the capability family id of this package.
const Family = "data"

// The node kinds of this family (parse_json is in package parsejson). No
// build registers them from init: a generated program registers those its
// workflow uses, so the others' code is left out; RegisterKinds registers
// all three.
var (
	KindJSONSelect     = runtime.NodeKind{Kind: "json_select", Family: Family, Prepare: prepareJSONSelect, ValueModel: true, NoWait: true}
	KindTemplateRender = runtime.NodeKind{Kind: "template_render", Family: Family, Prepare: prepareTemplateRender, ValueModel: true, NoWait: true}
	KindDiffCompute    = runtime.NodeKind{Kind: "diff_compute", Family: Family, Prepare: prepareDiffCompute, ValueModel: true, NoWait: true}
)

// RegisterKinds registers the node kinds of this package (capabilities/all
// calls it and parsejson.RegisterKinds; a generated program registers only
// the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindJSONSelect, KindTemplateRender, KindDiffCompute)
}

// json_select: {value, found}, a dotted walk inside the input value.
func prepareJSONSelect(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(dataspec.CheckJSONSelect(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	from, path := p.Path(n.InputFrom), n.Path
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		v, found := runtime.Lookup(c.GetValue(from), path)
		return runtime.Next(map[string]any{"value": v, "found": found}), nil
	}, nil
}

// template_render: {rendered}. Markers resolve against input_from first and
// then against the whole context; a marker that resolves nowhere stays.
func prepareTemplateRender(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(dataspec.CheckTemplateRender(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	tmpl, from := p.Template(n.Template), p.Path(n.InputFrom)
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		input := c.GetValue(from) // nil without input_from
		return runtime.Next(map[string]any{"rendered": tmpl.Render(input, c.Run)}), nil
	}, nil
}

// diff_compute: {added, removed, changed, unchanged} between two values.
func prepareDiffCompute(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(dataspec.CheckDiffCompute(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	left, right := p.Path(n.LeftFrom), p.Path(n.RightFrom)
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		return runtime.Next(Diff(c.GetValue(left), c.GetValue(right))), nil
	}, nil
}
