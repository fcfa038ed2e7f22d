package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Issue is one validation finding. Codes are stable snake_case strings
// (docs/validation-codes.md); messages name the node id and kind, route,
// trigger or table concerned.
type Issue struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

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

	nodes    map[string]*workflow.Node // first declaration of each id
	starts   map[string]*workflow.StartNode
	secrets  map[string]bool
	servers  map[string]bool // MCP servers
	backends map[string]bool
	// childDone marks child paths whose own issues were already reported.
	childDone map[string]bool
}

func newChecker(wf *workflow.Workflow, t *tree) *checker {
	c := &checker{
		wf: wf, tree: t,
		nodes:     map[string]*workflow.Node{},
		starts:    map[string]*workflow.StartNode{},
		secrets:   map[string]bool{},
		servers:   map[string]bool{},
		backends:  map[string]bool{"default": true},
		childDone: map[string]bool{},
	}
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
	for _, s := range wf.Secrets {
		c.secrets[s.Name] = true
	}
	for _, s := range wf.MCPServers {
		c.servers[s.Name] = true
	}
	if wf.Intelligence != nil {
		for _, b := range wf.Intelligence.Backends {
			c.backends[b.Name] = true
		}
	}
	return c
}

func (c *checker) add(code, format string, args ...any) {
	c.issues = append(c.issues, Issue{Code: code, Message: fmt.Sprintf(format, args...)})
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
	c.checkMCPServers()
	c.checkBackends()
	c.checkSecrets()
	c.checkPolicy()
}

// nodeLabel names a node in messages: node "id" (kind).
func nodeLabel(n *workflow.Node) string {
	if n.Type == "" {
		return fmt.Sprintf("node %q", n.ID)
	}
	return fmt.Sprintf("node %q (%s)", n.ID, n.Type)
}

// asset returns the loaded bytes of a declared file, or reports why it is
// missing with codes <prefix>_not_found / _unreadable / _not_loaded.
func (c *checker) asset(where, what, prefix, path string) ([]byte, bool) {
	if data, ok := c.wf.Assets[path]; ok {
		return data, true
	}
	if f := c.tree.failure(c.wf, path); f != nil {
		code := prefix + "_unreadable"
		if errors.Is(f.err, fs.ErrNotExist) {
			code = prefix + "_not_found"
		}
		c.add(code, "%s: %s %q: %s", where, what, path, readErrText(f.err))
		return nil, false
	}
	c.add("not_loaded", "%s: %s %q was not loaded (load the workflow with gen.Load)", where, what, path)
	return nil, false
}

// checkChild reports load failures and the issues of a child workflow
// declared by n as path; start, when set, must exist in the child.
func (c *checker) checkChild(n *workflow.Node, path, start string) {
	where := nodeLabel(n)
	if path == "" {
		return // reported as missing_field
	}
	child, ok := c.wf.Children[path]
	if !ok || child == nil {
		if c.childDone[path] {
			return
		}
		c.childDone[path] = true
		if f := c.tree.failure(c.wf, path); f != nil {
			c.add("child_"+f.kind, "%s: child workflow %q: %s", where, path, f.err)
			return
		}
		c.add("not_loaded", "%s: child workflow %q was not loaded (load the workflow with gen.Load)", where, path)
		return
	}
	if start != "" && !hasStart(child, start) {
		c.add("unknown_child_start", "%s: start %q is neither a start node nor a node of child workflow %q", where, start, path)
	}
	if c.childDone[path] {
		return
	}
	c.childDone[path] = true
	if c.tree.active[child] {
		c.add("child_cycle", "%s: child workflow %q calls back into a workflow that calls it", where, path)
		return
	}
	for _, is := range c.tree.validate(child) {
		c.add(is.Code, "%s: child workflow %q: %s", where, path, is.Message)
	}
}

func hasStart(wf *workflow.Workflow, start string) bool {
	for _, s := range wf.StartNodes {
		if s.Name == start {
			return true
		}
	}
	for _, n := range wf.Nodes {
		if n.ID == start {
			return true // compatibility: a start may name a node id
		}
	}
	return false
}

// nodeChildPaths lists the child workflow paths one node declares.
func nodeChildPaths(n *workflow.Node) []string {
	switch n.Type {
	case "call", "map":
		return uniqueNonEmpty([]string{n.Workflow})
	case "parallel":
		var out []string
		for _, b := range n.Branches {
			out = append(out, b.Workflow)
		}
		return uniqueNonEmpty(out)
	}
	return nil
}

// setKeys lists the TOML keys of a struct value that hold a non-zero
// value, in declaration order: how the validator tells which fields an
// author wrote.
func setKeys(v any) []string {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	var out []string
	t := rv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if !rv.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// checkFields reports missing required keys and keys that do not belong,
// for a struct whose kind (node type, trigger type, secret source) decides
// which keys apply. common keys are always allowed.
func (c *checker) checkFields(where string, v any, required, optional, common []string) {
	allowed := map[string]bool{}
	for _, k := range required {
		allowed[k] = true
	}
	for _, k := range optional {
		allowed[k] = true
	}
	for _, k := range common {
		allowed[k] = true
	}
	set := map[string]bool{}
	for _, k := range setKeys(v) {
		set[k] = true
		if !allowed[k] {
			c.add("field_not_allowed", "%s: %s does not apply here", where, k)
		}
	}
	for _, k := range required {
		if !set[k] {
			c.add("missing_field", "%s: %s is required", where, k)
		}
	}
}
