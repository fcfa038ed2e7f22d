package spec

import "github.com/kilnworks/kiln/runtime/workflow"

// Context is what a check needs from the rest of the workflow. The
// generator implements it over a loaded workflow tree (so a file or child
// that failed to load is reported with the loader's reason); ForWorkflow
// is the one a family's Prepare uses.
type Context interface {
	// Workflow is the workflow the checked node or trigger belongs to.
	Workflow() *workflow.Workflow
	// File returns a file the workflow declares under key, read with the
	// workflow; when it is missing the issues say why (file_not_found,
	// file_unreadable, not_loaded).
	File(key, path string) ([]byte, []Issue)
	// Schema checks a JSON Schema file the workflow declares under key: it
	// was read with the workflow (schema_not_found, ...) and, where the
	// checker can compile schemas, compiles offline (schema_invalid,
	// schema_remote_ref).
	Schema(key, path string) []Issue
	// Child checks a child workflow a node declares: it was loaded and,
	// when start is set, has that start; the generator also reports the
	// child's own issues.
	Child(path, start string) []Issue
}

// ForWorkflow is the Context of a workflow already loaded (by gen.Load, or
// compiled into a sealed binary): files and children are looked up in
// wf.Assets and wf.Children, schemas are only checked to be present (the
// family compiles them itself).
func ForWorkflow(wf *workflow.Workflow) Context { return workflowContext{wf} }

type workflowContext struct{ wf *workflow.Workflow }

func (c workflowContext) Workflow() *workflow.Workflow { return c.wf }

// MCPServer reports whether [[mcp_servers]] of wf declares name.
func MCPServer(wf *workflow.Workflow, name string) bool {
	for _, s := range wf.MCPServers {
		if s.Name == name {
			return true
		}
	}
	return false
}

// Backend reports whether name is an intelligence backend of wf: declared
// in [[intelligence.backends]], or the built-in "default".
func Backend(wf *workflow.Workflow, name string) bool {
	if name == DefaultBackend {
		return true
	}
	if wf.Intelligence != nil {
		for _, b := range wf.Intelligence.Backends {
			if b.Name == name {
				return true
			}
		}
	}
	return false
}

// Secret reports whether [[secrets]] of wf declares name.
func Secret(wf *workflow.Workflow, name string) bool {
	for _, s := range wf.Secrets {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (c workflowContext) File(key, path string) ([]byte, []Issue) {
	if data, ok := c.wf.Assets[path]; ok {
		return data, nil
	}
	return nil, NotLoaded(key, path)
}

func (c workflowContext) Schema(key, path string) []Issue {
	_, issues := c.File(key, path)
	return issues
}

func (c workflowContext) Child(path, start string) []Issue {
	child := c.wf.Children[path]
	if child == nil {
		var is Issues
		is.Add("not_loaded", "child workflow %q was not loaded (load the workflow with gen.Load)", path)
		return is
	}
	return ChildStart(child, path, start)
}

// DefaultBackend is the intelligence backend every workflow has: the one
// the process is given on its command line.
const DefaultBackend = "default"

// NotLoaded is the issue of a declared file the workflow was not loaded
// with.
func NotLoaded(key, path string) []Issue {
	var is Issues
	is.Add("not_loaded", "%s %q was not loaded (load the workflow with gen.Load)", key, path)
	return is
}

// ChildStart checks that start, when set, names a start node or (for
// compatibility) a node of child.
func ChildStart(child *workflow.Workflow, path, start string) []Issue {
	if start == "" {
		return nil
	}
	for _, s := range child.StartNodes {
		if s.Name == start {
			return nil
		}
	}
	for _, n := range child.Nodes {
		if n.ID == start {
			return nil
		}
	}
	var is Issues
	is.Add("unknown_child_start", "start %q is neither a start node nor a node of child workflow %q", start, path)
	return is
}
