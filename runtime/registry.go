package runtime

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Action is how a node handler ends.
type Action int

const (
	Continue  Action = iota // follow out-edges matching Branch
	Terminate               // run completed, final value null
	Fail                    // run failed with Reason
	Pause                   // run paused for approval with Reason
)

func (a Action) String() string {
	switch a {
	case Terminate:
		return "terminate"
	case Fail:
		return "fail"
	case Pause:
		return "pause"
	}
	return "continue"
}

// Result is what a node handler returns on success.
type Result struct {
	Action Action
	Value  any    // the node's output, stored under its id
	Branch string // "" = no branch (matches edges without `when`)
	Reason string // Fail / Pause
	// Respond, when set, declares the HTTP reply of the run (respond node).
	Respond *HTTPResponse
}

// Next continues with value v and no branch.
func Next(v any) Result { return Result{Value: v} }

// NextBranch continues with value v on branch b.
func NextBranch(v any, b string) Result { return Result{Value: v, Branch: b} }

// NodeFunc executes one node. It returns an error (ideally an *Error) to
// abort the run; the engine handles retries, counters and audit.
type NodeFunc func(ctx context.Context, c *Call) (Result, error)

// Prepare turns a node declaration into its handler at load time: compile
// schemas, check static arguments, resolve children. Errors here are load
// errors, so a bad workflow never starts.
type Prepare func(n *workflow.Node, p *Program) (NodeFunc, error)

// NodeKind is what a capability package registers for each node type.
type NodeKind struct {
	Kind    string
	Family  string // capability family (catalog id), e.g. "fs"
	Prepare Prepare
	// SideEffect marks kinds that dry-run must not execute; the engine
	// does not enforce it (handlers check Call.DryRun), it is documentation
	// for discovery and the manifest.
	SideEffect bool
	// ValueModel marks kinds whose handlers return only JSON value trees
	// (see value.go) made of fresh values and of values taken from the
	// run's context, which are value trees already: the engine skips
	// walking their whole output to normalise it on every step. A kind
	// that returns other Go values (ints, structs, typed slices) leaves
	// it false.
	ValueModel bool
	// NoWait marks kinds whose handlers never wait: no I/O, no sleeping,
	// no child runs, only computing on the run's context. map and
	// parallel run children made only of such nodes on their own
	// goroutine until the children have taken long enough for more
	// goroutines to pay (Run.RunChildren); a kind that may block leaves
	// it false, so that its children start on workers at once.
	NoWait bool
}

var (
	registryMu sync.RWMutex
	nodeKinds  = map[string]NodeKind{}
)

// RegisterNode registers a node kind. No family registers a kind from
// init: a generated program calls RegisterNode for each kind its workflow
// uses, so the linker leaves out the code of the others, and every build
// of that program (kiln build or a plain go build) links the same code.
// Registering the same kind twice is a programming error.
func RegisterNode(k NodeKind) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := nodeKinds[k.Kind]; dup {
		panic(fmt.Sprintf("kiln: node kind %q registered twice", k.Kind))
	}
	nodeKinds[k.Kind] = k
}

// RegisterKinds registers every kind of one family, for binaries that link
// the whole family (capabilities/all, a family's tests). A kind the same
// family already registered is kept, so calling it twice is harmless; a
// kind another family holds is a programming error.
func RegisterKinds(kinds ...NodeKind) {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, k := range kinds {
		if had, dup := nodeKinds[k.Kind]; dup {
			if had.Family == k.Family {
				continue
			}
			panic(fmt.Sprintf("kiln: node kind %q registered by families %q and %q", k.Kind, had.Family, k.Family))
		}
		nodeKinds[k.Kind] = k
	}
}

// LookupNode returns the registered handler for a node kind.
func LookupNode(kind string) (NodeKind, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	k, ok := nodeKinds[kind]
	return k, ok
}

// RegisteredNodeKinds lists the node kinds compiled into this binary.
func RegisteredNodeKinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(nodeKinds))
	for k := range nodeKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Call is what a handler sees: its node and the run it belongs to.
type Call struct {
	Node *workflow.Node
	Run  *Run
	// Attempt is 1 for the first try, 2 for the first retry, ...
	Attempt int
	// Scope, when set, replaces the run context for From and Lookup: agent_loop runs
	// tool handlers on the model's arguments ({"args": {...}}), never on
	// other node outputs.
	Scope map[string]any
}

// From resolves a dotted context path; a miss (or empty path) is nil.
func (c *Call) From(path string) any {
	v, _ := c.Lookup(path)
	return v
}

// Lookup resolves a dotted context path and reports whether it was found
// (a path that resolves to JSON null is found; a miss is not).
func (c *Call) Lookup(path string) (any, bool) {
	if path == "" {
		return nil, false
	}
	if c.Scope != nil {
		return Lookup(c.Scope, path)
	}
	return c.Run.Resolve(path)
}

// FromString resolves the context path given in the node's key field (for
// example key "path_from", path "trigger.path") and requires a string. The
// error names the node, its kind, the key and what was found instead.
func (c *Call) FromString(key, path string) (string, error) {
	v, ok := c.Lookup(path)
	return c.stringAt(key, path, v, ok)
}

// GetString is FromString for a compiled path.
func (c *Call) GetString(key string, path Path) (string, error) {
	v, ok := c.Get(path)
	return c.stringAt(key, path.text, v, ok)
}

func (c *Call) stringAt(key, path string, v any, ok bool) (string, error) {
	if !ok {
		return "", c.Errorf(ClassTool, "%s %q did not resolve to a value", key, path)
	}
	s, isString := v.(string)
	if !isString {
		return "", c.Errorf(ClassTool, "%s %q resolved to %s, want a string", key, path, TypeName(v))
	}
	return s, nil
}

// Errorf builds an *Error of class for this node.
func (c *Call) Errorf(class Class, format string, args ...any) *Error {
	e := Errorf(class, format, args...)
	e.Node, e.Kind = c.Node.ID, c.Node.Type
	return e
}

// DryRun reports whether side effects must be replaced by placeholders.
func (c *Call) DryRun() bool { return c.Run.DryRun }
