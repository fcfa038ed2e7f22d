// Package spec is the shape of a capability family's specification: the
// node kinds, trigger types and route auth kinds a family provides, each
// with its keys, limits, check, output, branches and policy gate.
//
// Every family declares its own in a small data-only package,
// capabilities/<family>/spec, that imports this package, runtime/workflow
// and the standard library only, so the generator can link every
// declaration without linking any family. The generator validates a
// workflow by calling the declared checks, the family's Prepare or Setup
// calls the same check functions (one rule, one message), and
// docs/reference.md is generated from the declarations.
package spec

import (
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Key types, as the reference names them.
const (
	Path    = "context path" // a dotted path into the run context
	String  = "string"
	Int     = "integer"
	Bool    = "boolean"
	Strings = "array of strings"
	Table   = "table of strings"
	Tables  = "array of tables"
)

// Key is one TOML key of a node kind, trigger type or auth binding.
type Key struct {
	Name string
	Type string
	// Required keys must be set. Check reports a missing one (the
	// generator only reports keys that do not belong); a test holds the
	// two in step.
	Required bool
	Default  string // documented default; "" when there is none
	Doc      string
}

// Kind declares one [[nodes]] type.
type Kind struct {
	Name string
	// Family is the catalog id of the declaring family; the registry
	// (capabilities/spec/all) fills it in.
	Family string
	Doc    string
	Keys   []Key
	// Limits are the documented bounds, one phrase each.
	Limits []string
	// Check validates one node of this kind: required keys and every rule
	// of the kind. Messages are relative ("max_steps must be ..."); the
	// caller names the node.
	Check func(n *workflow.Node, ctx Context) []Issue
	// Output is the shape of the node's output value.
	Output string
	// Branches are the branch labels the node can take ("" none; "*" any
	// string).
	Branches []string
	// Policy names the [policy] gate every execution passes ("" none).
	Policy string
	// Children lists the child workflows a node declares (nil: none).
	Children func(n *workflow.Node) []Child
	// Files lists the files a node declares that are read with the
	// workflow at load time (nil: none).
	Files func(n *workflow.Node) []string
}

// Child is one child workflow a node declares.
type Child struct {
	Path  string // as written
	Start string // "" for the child's default start
}

// Trigger declares one [[triggers]] type. type and start_node are common
// to every trigger and checked by the generator.
type Trigger struct {
	Name   string
	Family string // filled in by the registry
	Doc    string
	Keys   []Key
	Limits []string
	// Check validates one trigger of this type: its required keys and
	// every rule of the type; messages are relative.
	Check func(t *workflow.Trigger, ctx Context) []Issue
	// Payload is the shape of trigger.* in the run it starts.
	Payload string
	Policy  string
}

// Auth declares one route auth kind: what `auth = "<kind>[:binding]"` on
// an [[http_routes]] entry names, and its [auth.<kind>.<binding>] tables.
type Auth struct {
	Name   string
	Family string // filled in by the registry
	Doc    string
	Keys   []Key
	Limits []string
	// Bindings lists the declared binding names of this kind, sorted; nil
	// for a kind that takes no binding (mtls).
	Bindings func(a *workflow.Auth) []string
	// NamedOnly kinds must name their binding (oidc:name); the others
	// default to "default".
	NamedOnly bool
	// Check validates one binding; messages are relative to its table.
	Check func(a *workflow.Auth, name string, ctx Context) []Issue
	// Route checks what a route using this kind needs from the rest of
	// the workflow (mtls: a client-certificate [server.tls]).
	Route func(wf *workflow.Workflow) []Issue
}

// Family is one family's whole declaration.
type Family struct {
	ID       string // catalog id
	Kinds    []Kind
	Triggers []Trigger
	Auths    []Auth
	// Check validates the workflow-level tables the family owns (for
	// example [[intelligence.backends]]); messages name the table.
	Check func(wf *workflow.Workflow, ctx Context) []Issue
	// Needs are the needs one workflow states for this family (secrets it
	// names, hosts and paths its policy opens); gen/needs merges them.
	// NeedsDoc says what they are, for the reference.
	Needs    func(wf *workflow.Workflow) []Need
	NeedsDoc string
	// NeedsIfLinked merges Needs only when the family is linked: they come
	// from blocks a workflow may hold for other reasons ([policy],
	// [intelligence], [logging]), not from a table only this family reads.
	NeedsIfLinked bool
}

// Need kinds (runtime/needs).
const (
	NeedSecret     = "secret"
	NeedNetwork    = "network"
	NeedFilesystem = "filesystem"
)

// Need is one need a workflow states.
type Need struct {
	// Class asks for it: "" is the workflow's own (workflow:<name>);
	// otherwise mcp:<server>, intelligence:<provider> or family:<id>.
	Class string
	Kind  string // NeedSecret, NeedNetwork or NeedFilesystem
	Key   string // secret
	Host  string // network
	Path  string // filesystem
	Mode  string // filesystem: ro | rw
	Label string
	// Ungoverned marks access kiln performs itself, outside the workflow's
	// [policy] (a secret file, an OAuth2 token host, a collector).
	Ungoverned bool
}
