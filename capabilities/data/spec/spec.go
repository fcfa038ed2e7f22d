// Package spec declares the data family's node kinds: parse_json,
// json_select, template_render and diff_compute (see docs/reference.md).
// They have no side effects and pass no policy gate.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the data family's declaration.
var Family = spec.Family{
	ID: "data",
	Kinds: []spec.Kind{
		{
			Name:   "parse_json",
			Doc:    "Parses a string holding one JSON value.",
			Keys:   []spec.Key{{Name: "input_from", Type: spec.Path, Required: true, Doc: "the JSON text (a string)"}},
			Check:  CheckParseJSON,
			Output: "{parsed}",
		},
		{
			Name: "json_select",
			Doc:  "Walks a dotted path inside a value.",
			Keys: []spec.Key{
				{Name: "input_from", Type: spec.Path, Required: true, Doc: "the value to walk"},
				{Name: "path", Type: spec.Path, Required: true, Doc: "the dotted path inside it"},
			},
			Check:  CheckJSONSelect,
			Output: "{value, found}",
		},
		{
			Name: "template_render",
			Doc:  "Renders a {{marker}} template. A marker resolves against input_from first, then against the whole run context; one that resolves nowhere stays as written.",
			Keys: []spec.Key{
				{Name: "template", Type: spec.String, Required: true, Doc: "the template text"},
				{Name: "input_from", Type: spec.Path, Doc: "the value markers resolve against first"},
			},
			Check:  CheckTemplateRender,
			Output: "{rendered}",
		},
		{
			Name: "diff_compute",
			Doc:  "Compares two values.",
			Keys: []spec.Key{
				{Name: "left_from", Type: spec.Path, Required: true, Doc: "the old value"},
				{Name: "right_from", Type: spec.Path, Required: true, Doc: "the new value"},
			},
			Check:  CheckDiffCompute,
			Output: "{added, removed, changed, unchanged}",
		},
	},
}

// CheckParseJSON checks a parse_json node.
func CheckParseJSON(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("input_from", n.InputFrom != "")
	return is
}

// CheckJSONSelect checks a json_select node.
func CheckJSONSelect(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("input_from", n.InputFrom != "")
	is.Require("path", n.Path != "")
	return is
}

// CheckTemplateRender checks a template_render node.
func CheckTemplateRender(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("template", n.Template != "")
	return is
}

// CheckDiffCompute checks a diff_compute node.
func CheckDiffCompute(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("left_from", n.LeftFrom != "")
	is.Require("right_from", n.RightFrom != "")
	return is
}
