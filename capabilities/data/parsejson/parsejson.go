// Package parsejson is the data family's parse_json node kind, in a
// package of its own: its decoder (jsontext, the tokenizer behind Go's
// experimental encoding/json/v2) is linked only into binaries whose
// workflow parses JSON, not into every binary that links the data family
// (capabilities/catalog: KindPackages).
package parsejson

import (
	"context"

	dataspec "github.com/kilnworks/kiln/capabilities/data/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// KindParseJSON is the parse_json node kind. Nothing registers it from
// init: a generated program registers it when its workflow uses it.
var KindParseJSON = runtime.NodeKind{Kind: "parse_json", Family: dataspec.Family.ID, Prepare: prepare, ValueModel: true, NoWait: true}

// RegisterKinds registers the node kind of this package (capabilities/all
// calls it).
func RegisterKinds() { runtime.RegisterKinds(KindParseJSON) }

// parse_json: {parsed}; the input must be a string holding one JSON value.
func prepare(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(dataspec.CheckParseJSON(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	from := p.Path(n.InputFrom)
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		text, err := c.GetString("input_from", from)
		if err != nil {
			return runtime.Result{}, err
		}
		v, err := decode(text)
		if err != nil {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "input_from %q is not valid JSON: %v", from, err)
		}
		return runtime.Next(map[string]any{"parsed": v}), nil
	}, nil
}
