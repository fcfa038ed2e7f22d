package catalog

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Usage is what a workflow tree (the workflow and its child workflows)
// asks of the catalog.
type Usage struct {
	// Families are the family ids the tree needs, in table order; control
	// is always included.
	Families []string
	// NodeKinds, Triggers and AuthKinds are the distinct node kinds,
	// trigger types and route auth kinds the tree uses, sorted.
	NodeKinds []string
	Triggers  []string
	AuthKinds []string
	// Why maps each family id to the first reasons it is needed (for
	// messages and `kiln gen -v`), e.g. "node write (write_file)".
	Why map[string][]string
}

// Used resolves the families a workflow tree needs: from its node kinds
// (and the tools of agent loops), trigger types, HTTP routes and their auth
// kinds, [[secrets]] entries, a [logging.otel] block and the JSON Schemas
// routes (input_schema) and nodes (output_schema) declare; child
// workflows are included. Anything the catalog does not
// know (a node kind, trigger type or auth kind) is an error naming where it
// is used: the generator must never guess a family.
func Used(wf *workflow.Workflow) (*Usage, error) {
	u := &usage{
		families: map[string]bool{},
		kinds:    map[string]bool{},
		triggers: map[string]bool{},
		auths:    map[string]bool{},
		why:      map[string][]string{},
		seen:     map[*workflow.Workflow]bool{},
	}
	u.addFlagged(func(f Family) bool { return f.Always }, "always linked")
	u.walk(wf, "")
	if len(u.errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(u.errs, "; "))
	}
	ids := make([]string, 0, len(u.families))
	for id := range u.families {
		ids = append(ids, id)
	}
	ids, err := Sort(ids)
	if err != nil {
		return nil, err
	}
	return &Usage{
		Families:  ids,
		NodeKinds: setList(u.kinds),
		Triggers:  setList(u.triggers),
		AuthKinds: setList(u.auths),
		Why:       u.why,
	}, nil
}

type usage struct {
	families, kinds, triggers, auths map[string]bool
	why                              map[string][]string
	seen                             map[*workflow.Workflow]bool
	errs                             []string
}

// inlineSchema is the output_schema value that asks for any JSON without
// a schema file (capabilities/llm/spec.InlineSchema; the catalog links no
// family spec, and TestUsedSchemas checks the two agree).
const inlineSchema = "inline"

// maxWhy bounds the reasons kept per family; the first few explain enough.
const maxWhy = 3

func (u *usage) add(id, reason string) {
	u.families[id] = true
	if len(u.why[id]) < maxWhy {
		u.why[id] = append(u.why[id], reason)
	}
}

// addFlagged adds every family the flag selects: the always-linked ones,
// and those a workflow block or key needs rather than a node kind.
func (u *usage) addFlagged(flag func(Family) bool, reason string) {
	for _, f := range Families {
		if flag(f) {
			u.add(f.ID, reason)
		}
	}
}

func (u *usage) fail(where, format string, args ...any) {
	u.errs = append(u.errs, where+fmt.Sprintf(format, args...))
}

// walk visits wf and its children once each; where prefixes messages about
// a child workflow with its declared path.
func (u *usage) walk(wf *workflow.Workflow, where string) {
	if wf == nil || u.seen[wf] {
		return
	}
	u.seen[wf] = true
	for _, n := range wf.Nodes {
		id, ok := FamilyOfKind(n.Type)
		if !ok {
			u.fail(where, "node %s: node kind %q is not in the capability catalog", n.ID, n.Type)
			continue
		}
		u.kinds[n.Type] = true
		u.add(id, fmt.Sprintf("%snode %s (%s)", where, n.ID, n.Type))
		if n.OutputSchema != "" && n.OutputSchema != inlineSchema {
			u.addFlagged(func(f Family) bool { return f.Schemas }, fmt.Sprintf("%snode %s (output_schema)", where, n.ID))
		}
		// An agent loop's tools run through the handlers of their node
		// kinds, so their families must be linked too.
		for _, tool := range n.Tools {
			tid, ok := FamilyOfKind(tool)
			if !ok {
				u.fail(where, "node %s: tool %q is not a node kind of the capability catalog", n.ID, tool)
				continue
			}
			u.add(tid, fmt.Sprintf("%snode %s (%s tool %s)", where, n.ID, n.Type, tool))
		}
	}
	for i, t := range wf.Triggers {
		id, ok := FamilyOfTrigger(t.Type)
		if !ok {
			u.fail(where, "triggers[%d]: trigger type %q is not in the capability catalog", i, t.Type)
			continue
		}
		u.triggers[t.Type] = true
		u.add(id, fmt.Sprintf("%strigger %s", where, t.Type))
	}
	for _, r := range wf.HTTPRoutes {
		route := r.Method + " " + r.Path
		u.addFlagged(func(f Family) bool { return f.Routes }, where+"route "+route)
		if r.InputSchema != "" {
			u.addFlagged(func(f Family) bool { return f.Schemas }, where+"route "+route+" (input_schema)")
		}
		kind, _, _ := strings.Cut(r.Auth, ":")
		if kind == "" || kind == "none" {
			continue
		}
		id, ok := FamilyOfAuth(kind)
		if !ok {
			u.fail(where, "route %s: auth kind %q is not in the capability catalog", route, kind)
			continue
		}
		u.auths[kind] = true
		u.add(id, fmt.Sprintf("%sroute %s (auth %s)", where, route, kind))
	}
	if len(wf.Secrets) > 0 {
		u.addFlagged(func(f Family) bool { return f.Secrets }, where+"[[secrets]]")
	}
	if wf.Logging != nil && wf.Logging.OTel != nil {
		u.addFlagged(func(f Family) bool { return f.Telemetry }, where+"[logging.otel]")
	}
	// The process confines itself (Landlock) by the root workflow's
	// [policy] and [sandbox]; the runtime asks the same question.
	if ok, _ := confine.Wanted(wf); ok && where == "" {
		u.addFlagged(func(f Family) bool { return f.Confines }, "[policy] and [sandbox]: Landlock confinement")
	}
	if wf.State != nil && wf.State.Backend == "postgres" && where == "" {
		u.addFlagged(func(f Family) bool { return f.State }, "[state] backend = \"postgres\"")
	}
	if wf.Policy != nil && wf.Policy.Rego != nil {
		u.addFlagged(func(f Family) bool { return f.Rego }, where+"[policy.rego]")
	}
	for _, path := range runtime.SortedKeys(wf.Children) {
		u.walk(wf.Children[path], where+path+": ")
	}
}

func setList(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// KeysOf returns the capability keys the given families provide, sorted.
func KeysOf(families []string) []string {
	var out []string
	for _, id := range families {
		if f, ok := indexes().byID[id]; ok {
			out = append(out, f.Keys...)
		}
	}
	sort.Strings(out)
	return out
}
