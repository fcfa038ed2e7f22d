package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Issue is one validation finding. Codes are stable snake_case strings
// (docs/validation-codes.md); messages name the node id and kind, route,
// trigger or table concerned.
type Issue = spec.Issue

// ValidationError lists every issue of a well-formed but invalid workflow.
// `kiln` exits 5 on it.
type ValidationError struct {
	Workflow string
	Issues   []Issue
}

func (e *ValidationError) Error() string {
	if len(e.Issues) == 0 {
		return fmt.Sprintf("workflow %q is invalid", e.Workflow)
	}
	first := e.Issues[0]
	more := ""
	if n := len(e.Issues) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more)", n)
	}
	return fmt.Sprintf("workflow %q is invalid: %s: %s%s", e.Workflow, first.Code, first.Message, more)
}

// Validate checks a decoded workflow and, recursively, the children in
// wf.Children. It returns a *ValidationError listing every issue, or nil.
// Declared child workflows and files must already be loaded (gen.Load does
// that); Validate itself reads nothing from disk.
func Validate(wf *workflow.Workflow) error {
	if issues := validateTree(wf, nil); len(issues) > 0 {
		return &ValidationError{Workflow: wf.Name, Issues: issues}
	}
	return nil
}

// validateTree validates root and its children; failures are the loader's
// notes on declared files it could not load (nil outside Load).
func validateTree(root *workflow.Workflow, failures map[*workflow.Workflow]map[string]*loadFailure) []Issue {
	t := &tree{
		failures: failures,
		memo:     map[*workflow.Workflow][]Issue{},
		active:   map[*workflow.Workflow]bool{},
		heights:  map[*workflow.Workflow]int{},
	}
	issues := t.validate(root)
	return append(issues, t.depthIssues(root)...)
}

// tree validates a workflow and its children, each distinct child once.
type tree struct {
	failures map[*workflow.Workflow]map[string]*loadFailure
	memo     map[*workflow.Workflow][]Issue
	active   map[*workflow.Workflow]bool
	heights  map[*workflow.Workflow]int
}

func (t *tree) validate(wf *workflow.Workflow) []Issue {
	if issues, ok := t.memo[wf]; ok {
		return issues
	}
	t.active[wf] = true
	c := newChecker(wf, t)
	c.run()
	delete(t.active, wf)
	t.memo[wf] = c.issues
	return c.issues
}

// failure returns the loader's note on a path wf declares, if any.
func (t *tree) failure(wf *workflow.Workflow, path string) *loadFailure {
	return t.failures[wf][path]
}

// height is how many levels of child workflows wf nests (0: none).
func (t *tree) height(wf *workflow.Workflow, active map[*workflow.Workflow]bool) int {
	if h, ok := t.heights[wf]; ok {
		return h
	}
	if active[wf] {
		return 0 // a pointer cycle; reported as child_cycle elsewhere
	}
	active[wf] = true
	h := 0
	for _, child := range wf.Children {
		if child != nil {
			h = max(h, 1+t.height(child, active))
		}
	}
	delete(active, wf)
	t.heights[wf] = h
	return h
}

// depthIssues reports, at the root, each node whose child workflows nest
// deeper than the engine allows.
func (t *tree) depthIssues(root *workflow.Workflow) []Issue {
	var issues []Issue
	for _, n := range root.Nodes {
		for _, p := range nodeChildPaths(&n) {
			child := root.Children[p]
			if child == nil {
				continue
			}
			if levels := 1 + t.height(child, map[*workflow.Workflow]bool{}); levels > runtime.MaxCallDepth {
				issues = append(issues, Issue{Code: "child_depth_exceeded", Message: fmt.Sprintf(
					"%s: child workflow %q nests %d levels of workflows; the limit is %d",
					nodeLabel(&n), p, levels, runtime.MaxCallDepth)})
			}
		}
	}
	return issues
}

// checker validates one workflow.
type checker struct {
	wf     *workflow.Workflow
	tree   *tree
	issues []Issue

	nodes  map[string]*workflow.Node // first declaration of each id
	starts map[string]*workflow.StartNode
	// ctx is what the families' checks see of this workflow.
	ctx spec.Context
	// childDone marks child paths whose own issues were already reported.
	childDone map[string]bool
}

func newChecker(wf *workflow.Workflow, t *tree) *checker {
	c := &checker{
		wf: wf, tree: t,
		nodes:     map[string]*workflow.Node{},
		starts:    map[string]*workflow.StartNode{},
		childDone: map[string]bool{},
	}
	c.ctx = checkContext{c}
	for i := range wf.Nodes {
		n := &wf.Nodes[i]
		if _, dup := c.nodes[n.ID]; !dup && n.ID != "" {
			c.nodes[n.ID] = n
		}
	}
	for i := range wf.StartNodes {
		s := &wf.StartNodes[i]
		if _, dup := c.starts[s.Name]; !dup && s.Name != "" {
			c.starts[s.Name] = s
		}
	}
	return c
}

func (c *checker) add(code, format string, args ...any) {
	c.issues = append(c.issues, Issue{Code: code, Message: fmt.Sprintf(format, args...)})
}

// addAll adds a family check's issues, their messages prefixed with where
// (the node, trigger or table concerned).
func (c *checker) addAll(where string, issues []spec.Issue) {
	for _, is := range issues {
		c.add(is.Code, "%s: %s", where, is.Message)
	}
}

func (c *checker) run() {
	if strings.TrimSpace(c.wf.Name) == "" {
		c.add("missing_field", "workflow: name is required")
	}
	c.checkCapabilities()
	c.checkStartNodes()
	c.checkNodes()
	c.checkGraph()
	c.checkRoutes()
	c.checkTriggers()
	c.checkAuth()
	c.checkServer()
	c.checkLogging()
	c.checkSigning()
	c.checkBudget()
	c.checkFamilies()
	c.checkPolicy()
}

// nodeLabel names a node in messages: node "id" (kind).
func nodeLabel(n *workflow.Node) string {
	if n.Type == "" {
		return fmt.Sprintf("node %q", n.ID)
	}
	return fmt.Sprintf("node %q (%s)", n.ID, n.Type)
}

// asset returns the loaded bytes of a declared file, or issues saying why
// it is missing, with codes <prefix>_not_found / _unreadable / not_loaded.
func (c *checker) asset(what, prefix, path string) ([]byte, []spec.Issue) {
	if data, ok := c.wf.Assets[path]; ok {
		return data, nil
	}
	var is spec.Issues
	if f := c.tree.failure(c.wf, path); f != nil {
		code := prefix + "_unreadable"
		if errors.Is(f.err, fs.ErrNotExist) {
			code = prefix + "_not_found"
		}
		is.Add(code, "%s %q: %s", what, path, readErrText(f.err))
		return nil, is
	}
	return nil, spec.NotLoaded(what, path)
}

// child reports load failures and the issues of a child workflow declared
// as path; start, when set, must exist in the child. A child's own issues
// are reported once, at its first declaration.
func (c *checker) child(path, start string) []spec.Issue {
	var is spec.Issues
	child, ok := c.wf.Children[path]
	if !ok || child == nil {
		if c.childDone[path] {
			return nil
		}
		c.childDone[path] = true
		if f := c.tree.failure(c.wf, path); f != nil {
			is.Add("child_"+f.kind, "child workflow %q: %s", path, f.err)
			return is
		}
		is.Add("not_loaded", "child workflow %q was not loaded (load the workflow with gen.Load)", path)
		return is
	}
	is = append(is, spec.ChildStart(child, path, start)...)
	if c.childDone[path] {
		return is
	}
	c.childDone[path] = true
	if c.tree.active[child] {
		is.Add("child_cycle", "child workflow %q calls back into a workflow that calls it", path)
		return is
	}
	for _, ci := range c.tree.validate(child) {
		is.Add(ci.Code, "child workflow %q: %s", path, ci.Message)
	}
	return is
}

// checkContext is the spec.Context of a workflow being validated: files
// and children come with the loader's reasons for any that failed.
type checkContext struct{ c *checker }

func (x checkContext) Workflow() *workflow.Workflow { return x.c.wf }

func (x checkContext) File(key, path string) ([]byte, []spec.Issue) {
	return x.c.asset(key, "file", path)
}

func (x checkContext) Schema(key, path string) []spec.Issue {
	data, issues := x.c.asset(key, "schema", path)
	if issues != nil {
		return issues
	}
	return schemaIssues(key, path, data)
}

func (x checkContext) Child(path, start string) []spec.Issue { return x.c.child(path, start) }

// nodeChildPaths lists the child workflow paths one node declares.
func nodeChildPaths(n *workflow.Node) []string {
	kind, ok := all.Kind(n.Type)
	if !ok || kind.Children == nil {
		return nil
	}
	var out []string
	for _, ch := range kind.Children(n) {
		out = append(out, ch.Path)
	}
	return uniqueNonEmpty(out)
}
