// Package gen reads workflows strictly, validates them, plans their
// capabilities and needs, and emits and builds sealed Go programs.
package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/gen/internal/tomlkeys"
	"github.com/kilnworks/kiln/runtime/nesting"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// ParseError is an input error that stops loading: the file cannot be read,
// is not TOML, has an unknown key or a value of the wrong type. It names
// the file and line. `kiln` exits 2 on it.
type ParseError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		fmt.Fprintf(&b, "%s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadOptions tunes Load.
type LoadOptions struct {
	// SkipValidate returns the decoded workflow (children and assets
	// loaded as far as possible) without validating it.
	SkipValidate bool
	// SigningRequired makes a valid WORKFLOW.toml.sig mandatory for the
	// workflow and its children even without [signing] (--signing-required).
	SigningRequired bool
	// SigningKey is an operator-pinned Ed25519 public key (PEM) that
	// workflow signatures must verify with, overriding [signing]'s key
	// (--signing-key). See wfsign.go.
	SigningKey []byte
}

// maxFileBytes caps every file Load reads (workflows, schemas, prompts,
// JWKS): these are small declarations, and a path pointing at a huge or
// endless file must fail rather than exhaust memory.
const maxFileBytes = 8 << 20

// maxLoadDepth stops runaway child chains while loading; the validator
// reports anything deeper than runtime.MaxCallDepth.
const maxLoadDepth = 32

// Load reads, strictly decodes and validates the workflow at path, loading
// its child workflows into wf.Children and its declared files into
// wf.Assets. It returns a *ParseError for unreadable or malformed input and
// a *ValidationError listing every issue of a well-formed but invalid one.
func Load(path string, opts LoadOptions) (*workflow.Workflow, error) {
	return load(path, opts, osReadFile)
}

// load is Load with the file reader as a parameter (tests and the fuzz
// target read from memory).
func load(path string, opts LoadOptions, read func(string) ([]byte, error)) (*workflow.Workflow, error) {
	l := newLoader(read)
	l.setSigning(opts)
	wf, err := l.loadRoot(path)
	if err != nil {
		return nil, err
	}
	if l.sign.err != nil {
		return nil, l.sign.err
	}
	if opts.SkipValidate {
		return wf, nil
	}
	if issues := validateTree(wf, l.failures); len(issues) > 0 {
		return nil, &ValidationError{Workflow: wf.Name, Issues: issues}
	}
	return wf, nil
}

// document is the top level of a workflow file: either a workflow, or one
// workflow wrapped as [[workflows]].
type document struct {
	workflow.Workflow
	Workflows []workflow.Workflow `toml:"workflows"`
}

// Decode strictly decodes workflow TOML; name is used in error messages.
// It loads no children or assets (see Load).
func Decode(name string, data []byte) (*workflow.Workflow, error) {
	// The decoder's cost grows with the square of the nesting: refuse deep
	// documents before it runs.
	if err := nesting.TOML(data); err != nil {
		var ne *nesting.Error
		errors.As(err, &ne)
		return nil, &ParseError{File: name, Line: ne.Line, Msg: ne.Msg}
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &ParseError{File: name, Line: pe.Position.Line, Msg: pe.Message}
		}
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	ix := tomlkeys.Scan(string(data))
	respelled, err := respellRateLimits(raw, ix, name)
	if err != nil {
		return nil, err
	}
	c := &treeChecker{ix: ix}
	c.check(raw, reflect.TypeFor[document](), "")
	if p := c.first(); p != nil {
		return nil, &ParseError{File: name, Line: p.at.Line, Key: p.path, Msg: p.msg}
	}
	if err := checkWrapper(raw, ix, name); err != nil {
		return nil, err
	}
	text := string(data)
	if respelled {
		// The file spells a rate limit as an array of tables; decode the
		// respelled tree instead of the text.
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(raw); err != nil {
			return nil, &ParseError{File: name, Msg: err.Error()}
		}
		text = buf.String()
	}
	var doc document
	if _, err := toml.Decode(text, &doc); err != nil {
		// The tree check above accepts only what decodes; keep a clear
		// error anyway rather than trusting that.
		return nil, &ParseError{File: name, Msg: err.Error()}
	}
	wf := &doc.Workflow
	if len(doc.Workflows) == 1 {
		wf = &doc.Workflows[0]
	}
	sum := sha256.Sum256(data)
	wf.Source = name
	wf.Digest = hex.EncodeToString(sum[:])
	return wf, nil
}

// respellRateLimits accepts the older `[[http_routes.rate_limit]]` spelling
// (an array of tables under the route) as the table it means, when the
// route has exactly one; more than one is an error, since a route has one
// bucket. It rewrites raw in place and reports whether it changed anything.
func respellRateLimits(raw map[string]any, ix tomlkeys.Index, name string) (bool, error) {
	changed := false
	fix := func(doc map[string]any, prefix string) error {
		routes, _ := asList(doc["http_routes"])
		for i, r := range routes {
			route, ok := r.(map[string]any)
			if !ok {
				continue
			}
			list, ok := asList(route["rate_limit"])
			if !ok {
				continue
			}
			path := tomlkeys.JoinKey(tomlkeys.JoinIndex(tomlkeys.JoinKey(prefix, "http_routes"), i), "rate_limit")
			if len(list) != 1 {
				at := ix.Lookup(path)
				if len(list) > 1 {
					at = ix.Lookup(tomlkeys.JoinIndex(path, 1))
				}
				return &ParseError{File: name, Line: at.Line, Key: path,
					Msg: fmt.Sprintf("a route has one rate limit: write [http_routes.rate_limit] once (found %d [[http_routes.rate_limit]] tables)", len(list))}
			}
			if _, isTable := list[0].(map[string]any); isTable {
				route["rate_limit"] = list[0]
				changed = true
				// Later errors name path.key; point them at path[0].key.
				ix.Alias(path, tomlkeys.JoinIndex(path, 0))
			}
		}
		return nil
	}
	if err := fix(raw, ""); err != nil {
		return false, err
	}
	if wrapped, ok := asList(raw["workflows"]); ok && len(wrapped) == 1 {
		if doc, ok := wrapped[0].(map[string]any); ok {
			if err := fix(doc, tomlkeys.JoinIndex("workflows", 0)); err != nil {
				return false, err
			}
		}
	}
	return changed, nil
}

// checkWrapper accepts [[workflows]] holding exactly one workflow and
// nothing else at the top level.
func checkWrapper(raw map[string]any, ix tomlkeys.Index, name string) error {
	v, ok := raw["workflows"]
	if !ok {
		return nil
	}
	items, _ := asList(v)
	if len(items) != 1 {
		at := ix.Lookup("workflows")
		if len(items) > 1 {
			at = ix.Lookup(tomlkeys.JoinIndex("workflows", 1))
		}
		return &ParseError{File: name, Line: at.Line, Key: "workflows",
			Msg: fmt.Sprintf("a file may wrap exactly one workflow in [[workflows]], found %d", len(items))}
	}
	var first *problem
	for k := range raw {
		if k == "workflows" {
			continue
		}
		p := &problem{at: ix.Lookup(tomlkeys.JoinKey("", k)), path: tomlkeys.JoinKey("", k),
			msg: "top-level key not allowed next to [[workflows]]; move it into the wrapped workflow"}
		if first == nil || p.before(first) {
			first = p
		}
	}
	if first != nil {
		return &ParseError{File: name, Line: first.at.Line, Key: first.path, Msg: first.msg}
	}
	return nil
}

// problem is one strictness violation found in the decoded TOML tree.
type problem struct {
	at   tomlkeys.Pos
	path string
	msg  string
}

func (p *problem) before(q *problem) bool {
	if p.at.Off != q.at.Off {
		return p.at.Off < q.at.Off
	}
	return p.path < q.path
}

// treeChecker walks the generic TOML tree against the model's types,
// finding unknown keys and values of the wrong type with their position.
type treeChecker struct {
	ix       tomlkeys.Index
	problems []*problem
}

func (c *treeChecker) add(path, msg string) {
	c.problems = append(c.problems, &problem{at: c.ix.Lookup(path), path: path, msg: msg})
}

// first returns the problem that comes first in the file, or nil.
func (c *treeChecker) first() *problem {
	var first *problem
	for _, p := range c.problems {
		if first == nil || p.before(first) {
			first = p
		}
	}
	return first
}

var secretType = reflect.TypeFor[workflow.Secret]()

func (c *treeChecker) check(v any, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			c.typeError(path, t, v)
			return
		}
		fields := tomlFields(t)
		for k, sub := range m {
			kp := tomlkeys.JoinKey(path, k)
			ft, ok := fields[k]
			if !ok {
				c.add(kp, unknownKeyMessage(t, m, k))
				continue
			}
			c.check(sub, ft, kp)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			c.typeError(path, t, v)
			return
		}
		for k, sub := range m {
			c.check(sub, t.Elem(), tomlkeys.JoinKey(path, k))
		}
	case reflect.Slice:
		items, ok := asList(v)
		if !ok {
			c.typeError(path, t, v)
			return
		}
		for i, it := range items {
			c.check(it, t.Elem(), tomlkeys.JoinIndex(path, i))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.typeError(path, t, v)
		}
	case reflect.Int, reflect.Int64:
		if _, ok := v.(int64); !ok {
			c.typeError(path, t, v)
		}
	case reflect.Float64:
		switch v.(type) {
		case float64, int64:
		default:
			c.typeError(path, t, v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.typeError(path, t, v)
		}
	default:
		c.add(path, "unsupported value") // the model has no other kinds
	}
}

func (c *treeChecker) typeError(path string, t reflect.Type, v any) {
	c.add(path, fmt.Sprintf("expected %s, found %s", typeName(t), tomlTypeName(v)))
}

// asList returns the elements of a TOML array or array of tables.
func asList(v any) ([]any, bool) {
	switch l := v.(type) {
	case []any:
		return l, true
	case []map[string]any:
		out := make([]any, len(l))
		for i, m := range l {
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// literalSecretKeys are keys that would hold secret material in the file
// itself; each names the indirection to use instead.
var literalSecretKeys = map[string]string{
	"client_secret": "use client_secret_env",
	"api_key":       "use api_key_env",
	"password":      "read it from the environment or a [[secrets]] entry",
	"private_key":   "read it from a file or a [[secrets]] entry",
	"access_token":  "use a [[secrets]] entry",
	"refresh_token": "use a [[secrets]] entry",
	"token":         "use a [[secrets]] entry",
}

// unknownKeyMessage explains an unknown key; literal secrets get a message
// of their own, because the fix is an indirection, not a spelling.
func unknownKeyMessage(t reflect.Type, m map[string]any, k string) string {
	const literal = "literal secret material is not allowed here; "
	if t == secretType {
		switch k {
		case "client_secret", "secret":
			if m["source"] == "oauth2" {
				return literal + "use client_secret_env"
			}
			return literal + `use source = "env" with var, or source = "file" with path`
		case "value", "token", "password":
			return literal + `use source = "env" with var, or source = "file" with path`
		}
	}
	if hint, ok := literalSecretKeys[k]; ok {
		return literal + hint
	}
	return fmt.Sprintf("unknown key %q", k)
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "table"
	case reflect.Slice:
		e := t.Elem()
		for e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		switch e.Kind() {
		case reflect.Struct, reflect.Map:
			return "array of tables"
		case reflect.String:
			return "array of strings"
		}
		return "array"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Float64:
		return "number"
	case reflect.Bool:
		return "boolean"
	}
	return t.String()
}

func tomlTypeName(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case map[string]any:
		return "table"
	case []any, []map[string]any:
		return "array"
	case time.Time:
		return "date-time"
	}
	return fmt.Sprintf("%T", v)
}

// tomlFields maps the TOML keys of struct t (embedded structs flattened)
// to their types; fields tagged "-" are not keys.
func tomlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for k, ft := range tomlFields(f.Type) {
				out[k] = ft
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
