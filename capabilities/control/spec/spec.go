// Package spec declares the control family's node kinds: condition,
// switch, merge, fail, terminate, respond and pause_for_approval (see
// docs/reference.md). Every sealed binary links the control family, so
// this package imports nothing beyond capabilities/spec, runtime/workflow
// and small standard packages.
package spec

import (
	"strings"
	"unicode"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the control family's declaration.
var Family = spec.Family{
	ID: "control",
	Kinds: []spec.Kind{
		{
			Name:     "condition",
			Doc:      "Branches on the JSON truthiness of a value: false, null, 0, \"\" and empty arrays and objects are false.",
			Keys:     []spec.Key{expr},
			Check:    CheckExpr,
			Output:   "{value}",
			Branches: []string{"true", "false"},
		},
		{
			Name:     "switch",
			Doc:      "Branches on the string form of a value: a string as it is, numbers and booleans as JSON, anything else its JSON text.",
			Keys:     []spec.Key{expr},
			Check:    CheckExpr,
			Output:   "{value}",
			Branches: []string{"*"},
		},
		{
			Name:   "merge",
			Doc:    "A pass-through join of several paths.",
			Check:  none,
			Output: "null",
		},
		{
			Name:   "fail",
			Doc:    "Ends the run Failed with the declared reason.",
			Keys:   []spec.Key{{Name: "reason", Type: spec.String, Default: "workflow failed", Doc: "the run's failure reason"}},
			Check:  none,
			Output: "none: the run ends",
		},
		{
			Name:   "terminate",
			Doc:    "Ends the run Completed with final value null.",
			Check:  none,
			Output: "none: the run ends",
		},
		{
			Name: "respond",
			Doc:  "Declares the HTTP reply of the run; the last respond on the path wins. The body template renders against input_from, else the trigger.",
			Keys: []spec.Key{
				{Name: "body_template", Type: spec.String, Required: true, Doc: "the reply body, a {{marker}} template"},
				{Name: "status", Type: spec.Int, Default: "200", Doc: "the HTTP status"},
				{Name: "content_type", Type: spec.String, Default: "application/json", Doc: "the reply's media type"},
				{Name: "input_from", Type: spec.Path, Doc: "the value markers resolve against (default: the trigger)"},
			},
			Limits: []string{"status 100..599"},
			Check:  CheckRespond,
			Output: "{status, content_type, bytes}",
		},
		{
			Name:   "pause_for_approval",
			Doc:    "Writes a checkpoint (the run needs a state directory) and ends the run Paused; an approval resumes it at the node's single unconditional successor.",
			Keys:   []spec.Key{{Name: "reason", Type: spec.String, Doc: "shown to the approver"}},
			Check:  none,
			Output: "none: the run pauses",
		},
	},
}

var expr = spec.Key{Name: "expr", Type: spec.Path, Required: true, Doc: "the value to branch on"}

func none(*workflow.Node, spec.Context) []spec.Issue { return nil }

// CheckExpr checks a condition or switch node.
func CheckExpr(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("expr", n.Expr != "")
	return is
}

// CheckRespond checks a respond node.
func CheckRespond(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("body_template", n.BodyTemplate != "")
	if n.Status != nil && (*n.Status < 100 || *n.Status > 599) {
		is.Add("respond_status", "status %d is outside 100..599", *n.Status)
	}
	if n.ContentType != "" && !MediaType(n.ContentType) {
		is.Add("respond_content_type", "content_type %q is not a media type", n.ContentType)
	}
	return is
}

// MediaType reports whether s is a media type with optional parameters,
// accepting what mime.ParseMediaType accepts, and holds no line break. It
// is written out because the mime package would add about 70 KB to every
// sealed binary; a test holds it to mime.ParseMediaType.
func MediaType(s string) bool {
	if strings.ContainsAny(s, "\r\n") {
		return false
	}
	base, _, _ := strings.Cut(s, ";")
	typ, rest := token(strings.TrimSpace(strings.ToLower(base)))
	if typ == "" {
		return false
	}
	if rest != "" {
		sub, after := token(strings.TrimPrefix(rest, "/"))
		if rest[0] != '/' || sub == "" || after != "" {
			return false
		}
	}
	seen := map[string]string{}
	for v := s[len(base):]; ; {
		v = strings.TrimLeftFunc(v, unicode.IsSpace)
		if v == "" {
			return true
		}
		key, value, rest, ok := param(v)
		if !ok {
			return strings.TrimSpace(v) == ";" // a trailing semicolon
		}
		if prev, dup := seen[key]; dup && prev != value {
			return false
		}
		seen[key] = value
		v = rest
	}
}

// param consumes `; key = value` with value a token or a quoted string.
func param(v string) (key, value, rest string, ok bool) {
	rest, ok = strings.CutPrefix(v, ";")
	if !ok {
		return "", "", "", false
	}
	key, rest = token(strings.TrimLeftFunc(rest, unicode.IsSpace))
	if key == "" {
		return "", "", "", false
	}
	rest, ok = strings.CutPrefix(strings.TrimLeftFunc(rest, unicode.IsSpace), "=")
	if !ok {
		return "", "", "", false
	}
	rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
	value, after, ok := paramValue(rest)
	if !ok {
		return "", "", "", false
	}
	return strings.ToLower(key), value, after, true
}

func paramValue(v string) (value, rest string, ok bool) {
	if !strings.HasPrefix(v, `"`) {
		value, rest = token(v)
		return value, rest, value != ""
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return b.String(), v[i+1:], true
		case c == '\\' && i+1 < len(v) && strings.IndexByte(tspecials, v[i+1]) >= 0:
			b.WriteByte(v[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", "", false // no closing quote
}

const tspecials = `()<>@,;:\"/[]?=`

// token splits off the longest prefix of RFC 2045 token characters.
func token(v string) (tok, rest string) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(tspecials, c) >= 0 {
			return v[:i], v[i:]
		}
	}
	return v, ""
}
