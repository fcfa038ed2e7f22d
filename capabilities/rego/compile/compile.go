// Package compile turns a [policy.rego] block into a prepared Rego query
// with the Open Policy Agent's v1 Go API. The generator calls Check (so
// `kiln check` reports a bad policy with its file, line and OPA's message)
// and the rego family calls Prepare at start-up: one set of rules for both.
//
// A policy may only narrow the binary's authority: built-ins that reach
// outside the process (http.send, net.lookup_ip_addr, opa.runtime, ...)
// are removed from the capabilities the policy is compiled against, so a
// policy that calls one does not compile.
package compile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"

	regospec "github.com/kilnworks/kiln/capabilities/rego/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// refusedBuiltins reach outside the process: the network, the process's
// environment and configuration, or (JSON Schema $ref) remote documents.
var refusedBuiltins = map[string]string{
	"http.send":          "it sends HTTP requests",
	"net.lookup_ip_addr": "it resolves names over the network",
	"opa.runtime":        "it reads the process environment and configuration",
	"json.match_schema":  "a schema $ref may fetch a remote document",
	"json.verify_schema": "a schema $ref may fetch a remote document",
}

// localNondeterministic are the built-ins OPA marks non-deterministic that
// stay inside the process (clock, randomness, JWT signing and checking).
// Any other non-deterministic built-in, including one a later OPA adds,
// is refused: fail closed.
var localNondeterministic = []string{
	"io.jwt.decode_verify", "io.jwt.encode_sign", "io.jwt.encode_sign_raw",
	"rand.intn", "time.now_ns", "uuid.rfc4122",
}

// Capabilities are OPA's capabilities for this version without the
// refused built-ins and with no network host allowed.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool { return Refused(b.Name) })
	caps.AllowNet = []string{}
	return caps
}

// Refused reports whether a policy may not call built-in name.
func Refused(name string) bool {
	if _, ok := refusedBuiltins[name]; ok {
		return true
	}
	b, ok := ast.BuiltinMap[name]
	return ok && b.Nondeterministic && !slices.Contains(localNondeterministic, name)
}

func refusedWhy(name string) string {
	if why, ok := refusedBuiltins[name]; ok {
		return why
	}
	return "it is non-deterministic and may reach outside the binary"
}

// EvalTimeout bounds one decision; a policy that does not finish in time
// denies.
const EvalTimeout = time.Second

// Check reports what is wrong with wf's [policy.rego] beyond its shape
// (which the family's spec Check reports; nothing is reported here while
// the shape is wrong): the Rego does not parse, does not declare package
// agent, calls a refused built-in, does not compile, or its query names
// no rule. Each issue names the file (or "inline") and line.
func Check(wf *workflow.Workflow, ctx spec.Context) []spec.Issue {
	if wf.Policy == nil || wf.Policy.Rego == nil || len(regospec.Check(wf, ctx)) > 0 {
		return nil
	}
	var file []byte
	if r := wf.Policy.Rego; r.File != "" {
		file, _ = ctx.File("file", r.File)
	}
	_, issues := compilePolicy(wf.Policy.Rego, file)
	return issues
}

// compilePolicy compiles r's source (file, the content of r.File) and
// checks its query.
func compilePolicy(r *workflow.RegoPolicy, file []byte) (*ast.Compiler, []spec.Issue) {
	name, src := r.File, r.Inline
	if name != "" {
		src = string(file)
	} else {
		name = regospec.InlineName
	}
	compiler, issues := compileModule(name, src)
	if compiler == nil {
		return nil, issues
	}
	if issues := checkQuery(compiler, r); len(issues) > 0 {
		return nil, issues
	}
	return compiler, nil
}

// Decider is a prepared [policy.rego] decision.
type Decider struct {
	query string
	pq    rego.PreparedEvalQuery
}

// Prepare checks and compiles r (files: the workflow's declared files)
// and prepares its query.
func Prepare(r *workflow.RegoPolicy, files map[string][]byte) (*Decider, error) {
	wf := &workflow.Workflow{Policy: &workflow.Policy{Rego: r}, Assets: files}
	if err := spec.Err(regospec.Check(wf, spec.ForWorkflow(wf))); err != nil {
		return nil, err
	}
	compiler, issues := compilePolicy(r, files[r.File])
	if err := spec.Err(issues); err != nil {
		return nil, err
	}
	data := make(map[string]any, len(r.Data))
	for k, v := range r.Data {
		data[k] = v
	}
	query := regospec.Query(r)
	pq, err := rego.New(
		rego.Query(query),
		rego.Compiler(compiler),
		rego.Store(inmem.NewFromObject(data)),
		rego.Capabilities(Capabilities()),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: query %s: %v", regospec.Table, query, err)
	}
	return &Decider{query: query, pq: pq}, nil
}

// compileModule parses and compiles one policy module against the
// restricted capabilities.
func compileModule(name, src string) (*ast.Compiler, []spec.Issue) {
	var is spec.Issues
	if strings.TrimSpace(src) == "" {
		is.Add("rego_parse_error", "%s: %s:1: the policy is empty; it must declare package %s", regospec.Table, name, regospec.Package)
		return nil, is
	}
	caps := Capabilities()
	mod, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{Capabilities: caps, RegoVersion: ast.RegoV1})
	if err != nil {
		addErrors(&is, "rego_parse_error", name, err)
		return nil, is
	}
	if mod == nil { // only comments
		is.Add("rego_parse_error", "%s: %s:1: the policy is empty; it must declare package %s", regospec.Table, name, regospec.Package)
		return nil, is
	}
	if got := mod.Package.Path.String(); got != "data."+regospec.Package {
		is.Add("rego_package", "%s: %s: package %s, want package %s", regospec.Table, at(name, mod.Package.Location),
			strings.TrimPrefix(got, "data."), regospec.Package)
		return nil, is
	}
	// The capabilities are what refuses these calls; naming them here
	// gives a clearer message than OPA's "undefined function".
	for _, c := range calls(mod) {
		if Refused(c.name) {
			is.Add("rego_builtin_refused", "%s: %s: %s is refused (%s): a policy must not widen the binary's authority",
				regospec.Table, at(name, c.loc), c.name, refusedWhy(c.name))
		}
	}
	if len(is) > 0 {
		return nil, is
	}
	compiler := ast.NewCompiler().WithCapabilities(caps).WithEnablePrintStatements(false)
	compiler.Compile(map[string]*ast.Module{name: mod})
	if compiler.Failed() {
		addErrors(&is, "rego_compile_error", name, compiler.Errors)
		return nil, is
	}
	return compiler, nil
}

// checkQuery refuses a query that names no rule of the policy and no data
// key: every decision would be undefined, so every tool call denied; that
// is a typo, not a policy.
func checkQuery(compiler *ast.Compiler, r *workflow.RegoPolicy) []spec.Issue {
	query := regospec.Query(r)
	ref, err := ast.ParseRef(query)
	if err != nil || len(compiler.GetRules(ref)) > 0 {
		return nil // the spec checked the query's shape
	}
	if len(ref) > 1 {
		if key, ok := ref[1].Value.(ast.String); ok {
			if _, isData := r.Data[string(key)]; isData {
				return nil
			}
		}
	}
	var is spec.Issues
	is.Add("rego_query_undefined", "%s: query %s names no rule of the policy (and no data key): every tool call would be denied", regospec.Table, query)
	return is
}

// at renders a location as file:line.
func at(name string, loc *ast.Location) string {
	if loc == nil {
		return name
	}
	file := loc.File
	if file == "" {
		file = name
	}
	return fmt.Sprintf("%s:%d", file, max(loc.Row, 1)) // row 0: the whole file
}

// addErrors records OPA's errors, each with its file, line and message.
func addErrors(is *spec.Issues, code, name string, err error) {
	var errs ast.Errors
	var one *ast.Error
	switch {
	case errors.As(err, &errs):
	case errors.As(err, &one):
		errs = ast.Errors{one}
	default:
		is.Add(code, "%s: %s: %v", regospec.Table, name, err)
		return
	}
	for _, e := range errs {
		is.Add(code, "%s: %s: %s: %s", regospec.Table, at(name, e.Location), e.Code, e.Message)
	}
}

type call struct {
	name string
	loc  *ast.Location
}

// calls lists the functions mod calls, in source order.
func calls(mod *ast.Module) []call {
	var out []call
	ast.WalkExprs(mod, func(e *ast.Expr) bool {
		if e.IsCall() {
			out = append(out, call{e.Operator().String(), e.Location})
		}
		return false
	})
	ast.WalkTerms(mod, func(t *ast.Term) bool {
		if c, ok := t.Value.(ast.Call); ok && len(c) > 0 {
			out = append(out, call{c[0].String(), t.Location})
		}
		return false
	})
	sort.SliceStable(out, func(i, j int) bool { return row(out[i].loc) < row(out[j].loc) })
	return out
}

func row(l *ast.Location) int {
	if l == nil {
		return 0
	}
	return l.Row
}

// Decide evaluates the prepared query on one tool decision: only the
// value true allows; undefined, any other value, an error or running past
// EvalTimeout denies.
func (d *Decider) Decide(r policy.Request) error {
	// A timer cancels the evaluation: with no external cancel OPA starts a
	// goroutine per evaluation to watch the context, which costs more than
	// a small policy's whole decision.
	cancel := topdown.NewCancel()
	timer := time.AfterFunc(EvalTimeout, cancel.Cancel)
	defer timer.Stop()
	rs, err := d.pq.Eval(context.Background(), rego.EvalParsedInput(Input(r)), rego.EvalExternalCancel(cancel),
		rego.EvalMetrics(metrics.NoOp()))
	switch {
	case err != nil:
		return fmt.Errorf("%s %s failed: %v", regospec.Table, d.query, err)
	case len(rs) == 0:
		return fmt.Errorf("%s %s is undefined (deny by default)", regospec.Table, d.query)
	case len(rs) == 1 && len(rs[0].Expressions) == 1 && rs[0].Expressions[0].Value == true:
		return nil
	case len(rs) == 1 && len(rs[0].Expressions) == 1 && rs[0].Expressions[0].Value == false:
		return fmt.Errorf("%s %s is false", regospec.Table, d.query)
	}
	return fmt.Errorf("%s %s is not true", regospec.Table, d.query)
}

// Input is the input document of a decision:
// {"tool": "fs.read", "args": {"path": "/data/safe/a"}}.
func Input(r policy.Request) ast.Value {
	args := ast.NewObject()
	for k, v := range r.Args {
		args.Insert(ast.StringTerm(k), value(v))
	}
	return ast.NewObject(
		[2]*ast.Term{ast.StringTerm("tool"), ast.StringTerm(r.Tool)},
		[2]*ast.Term{ast.StringTerm("args"), ast.NewTerm(args)},
	)
}

func value(v any) *ast.Term {
	switch v := v.(type) {
	case string:
		return ast.StringTerm(v)
	case []string:
		terms := make([]*ast.Term, len(v))
		for i, s := range v {
			terms[i] = ast.StringTerm(s)
		}
		return ast.ArrayTerm(terms...)
	}
	t, err := ast.InterfaceToValue(v)
	if err != nil {
		return ast.NullTerm()
	}
	return ast.NewTerm(t)
}
