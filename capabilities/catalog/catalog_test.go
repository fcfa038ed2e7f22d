package catalog_test

import (
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/all"
	"github.com/kilnworks/kiln/capabilities/catalog"
	llmspec "github.com/kilnworks/kiln/capabilities/llm/spec"
	specs "github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestTableShape checks the invariants every consumer of the table
// relies on: ids, packages and tags follow one scheme, and no node kind,
// trigger, auth kind or key belongs to two families.
func TestTableShape(t *testing.T) {
	key := regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	owner := map[string]string{}
	claim := func(what, name, id string) {
		t.Helper()
		if prev, dup := owner[what+" "+name]; dup {
			t.Errorf("%s %q is in both %s and %s", what, name, prev, id)
		}
		owner[what+" "+name] = id
	}
	always := 0
	for _, f := range catalog.Families {
		if f.Package != catalog.PackagePrefix+f.ID {
			t.Errorf("%s: package %q, want %q", f.ID, f.Package, catalog.PackagePrefix+f.ID)
		}
		if f.Tag != "kiln_"+f.ID {
			t.Errorf("%s: tag %q, want kiln_%s", f.ID, f.Tag, f.ID)
		}
		if f.Description == "" || len(f.Keys) == 0 {
			t.Errorf("%s: needs a description and at least one capability key", f.ID)
		}
		claim("family", f.ID, f.ID)
		for _, k := range f.NodeKinds {
			claim("node kind", k, f.ID)
		}
		// A kind package is a sub-package of its family (so a build's
		// packages still name their family) and holds a kind of it.
		for k, p := range f.KindPackages {
			if !slices.Contains(f.NodeKinds, k) {
				t.Errorf("%s: KindPackages names %q, not one of its node kinds", f.ID, k)
			}
			if !strings.HasPrefix(p, f.Package+"/") {
				t.Errorf("%s: kind %s in package %q, outside %s/", f.ID, k, p, f.Package)
			}
		}
		for _, k := range f.Triggers {
			claim("trigger", k, f.ID)
		}
		for _, k := range f.AuthKinds {
			claim("auth kind", k, f.ID)
		}
		for _, k := range f.Keys {
			claim("key", k, f.ID)
			if !key.MatchString(k) {
				t.Errorf("%s: key %q is not a dotted lower-case name", f.ID, k)
			}
		}
		if f.Always {
			always++
		}
	}
	if always != 1 || catalog.Families[0].ID != "control" || !catalog.Families[0].Always {
		t.Errorf("control must be the one always-linked family, first in the table")
	}
	want := []string{"control", "data", "fs", "env", "llm", "mcp", "http", "oidc", "httpclient", "shell", "compose", "cron", "interval", "fswatch", "event", "secrets", "otel", "sandbox", "rego", "pgstate", "schema"}
	if got := catalog.IDs(); !reflect.DeepEqual(got, want) {
		t.Errorf("families = %v, want exactly %v", got, want)
	}
}

// TestCatalogMatchesRegistry links every family (capabilities/all with no
// tags) and checks the node kinds the packages really register against
// the table, both ways, including the family each kind says it is from.
func TestCatalogMatchesRegistry(t *testing.T) {
	registered := runtime.RegisteredNodeKinds()
	if got, want := registered, catalog.NodeKinds(); !reflect.DeepEqual(got, want) {
		t.Errorf("registered node kinds differ from the catalog\n registered: %v\n catalog:    %v\n missing from catalog: %v\n not registered: %v",
			got, want, minus(got, want), minus(want, got))
	}
	for _, kind := range registered {
		k, _ := runtime.LookupNode(kind)
		id, ok := catalog.FamilyOfKind(kind)
		if ok && k.Family != id {
			t.Errorf("node kind %s registers family %q, catalog says %q", kind, k.Family, id)
		}
	}
	for _, e := range runtime.Extensions() {
		// The ops listener (capabilities/internal/ops) is shared by every
		// long-running family rather than being one.
		if e.Name == "ops" {
			continue
		}
		if _, ok := catalog.Lookup(e.Name); !ok {
			t.Errorf("extension %q is not a catalog family", e.Name)
		}
	}
	// Families that only serve triggers act through an extension.
	ext := map[string]bool{}
	for _, e := range runtime.Extensions() {
		ext[e.Name] = true
	}
	for _, f := range catalog.Families {
		if len(f.Triggers) > 0 && len(f.NodeKinds) == 0 && !ext[f.ID] {
			t.Errorf("trigger family %s registers no extension", f.ID)
		}
		// A family selected by a workflow block rather than a node kind
		// (routes, [[secrets]], [logging.otel]) can only act through one.
		if (f.Routes || f.Secrets || f.Telemetry) && !ext[f.ID] {
			t.Errorf("family %s is selected by a workflow block but registers no extension", f.ID)
		}
	}
	// Exactly one family each serves routes, resolves secrets and exports
	// telemetry: Used adds every flagged family.
	for flag, of := range map[string]func(catalog.Family) bool{
		"Routes":    func(f catalog.Family) bool { return f.Routes },
		"Secrets":   func(f catalog.Family) bool { return f.Secrets },
		"Telemetry": func(f catalog.Family) bool { return f.Telemetry },
		"Rego":      func(f catalog.Family) bool { return f.Rego },
		"State":     func(f catalog.Family) bool { return f.State },
		"Schemas":   func(f catalog.Family) bool { return f.Schemas },
	} {
		n := 0
		for _, f := range catalog.Families {
			if of(f) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d families are marked %s, want 1", n, flag)
		}
	}
}

func minus(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

func TestUsed(t *testing.T) {
	child := &workflow.Workflow{Name: "child", Nodes: []workflow.Node{{ID: "sh", Type: "shell_run"}}}
	wf := &workflow.Workflow{
		Name: "w",
		Nodes: []workflow.Node{
			{ID: "r", Type: "read_env"},
			{ID: "t", Type: "template_render"},
			{ID: "c", Type: "call", Workflow: "child.toml"},
			{ID: "end", Type: "terminate"},
			{ID: "agent", Type: "agent_loop", Tools: []string{"read_file", "http_request"}},
		},
		Triggers:   []workflow.Trigger{{Type: "cron"}, {Type: "mcp.resource.updated"}},
		HTTPRoutes: []workflow.HTTPRoute{{Method: "POST", Path: "/a", Auth: "oidc:corp"}, {Method: "GET", Path: "/b", Auth: "none"}},
		Secrets:    []workflow.Secret{{Name: "k", Source: "env", Var: "K"}},
		Children:   map[string]*workflow.Workflow{"child.toml": child},
	}
	u, err := catalog.Used(wf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"control", "data", "fs", "env", "llm", "mcp", "http", "oidc", "httpclient", "shell", "compose", "cron", "secrets"}
	if !reflect.DeepEqual(u.Families, want) {
		t.Errorf("families = %v, want %v", u.Families, want)
	}
	if !reflect.DeepEqual(u.NodeKinds, []string{"agent_loop", "call", "read_env", "shell_run", "template_render", "terminate"}) {
		t.Errorf("kinds = %v", u.NodeKinds)
	}
	if !reflect.DeepEqual(u.AuthKinds, []string{"oidc"}) || !reflect.DeepEqual(u.Triggers, []string{"cron", "mcp.resource.updated"}) {
		t.Errorf("auth = %v triggers = %v", u.AuthKinds, u.Triggers)
	}
	if got := strings.Join(u.Why["shell"], ";"); got != "child.toml: node sh (shell_run)" {
		t.Errorf("why shell = %q", got)
	}
	if got := strings.Join(u.Why["fs"], ";"); got != "node agent (agent_loop tool read_file)" {
		t.Errorf("why fs = %q", got)
	}

	// [logging.otel] selects the otel family, in the root or in a child.
	otel := &workflow.Logging{OTel: &workflow.OTelLog{Endpoint: "http://127.0.0.1:4318"}}
	for _, c := range []struct {
		name string
		wf   *workflow.Workflow
		why  string
	}{
		{"root", &workflow.Workflow{Name: "o", Logging: otel, Nodes: []workflow.Node{{ID: "end", Type: "terminate"}}}, "[logging.otel]"},
		{"child", &workflow.Workflow{Name: "o", Nodes: []workflow.Node{{ID: "c", Type: "call", Workflow: "sub.toml"}},
			Children: map[string]*workflow.Workflow{"sub.toml": {Name: "sub", Logging: otel}}}, "sub.toml: [logging.otel]"},
	} {
		u, err := catalog.Used(c.wf)
		if err != nil || !slices.Contains(u.Families, "otel") || strings.Join(u.Why["otel"], ";") != c.why {
			t.Errorf("%s: families %v why %v (%v)", c.name, u.Families, u.Why["otel"], err)
		}
	}
	// [logging] without an otel block does not.
	u, err = catalog.Used(&workflow.Workflow{Logging: &workflow.Logging{Level: "debug"}, Nodes: []workflow.Node{{ID: "end", Type: "terminate"}}})
	if err != nil || slices.Contains(u.Families, "otel") {
		t.Errorf("[logging] alone: %v %v", u, err)
	}
	if id, ok := catalog.FamilyOfKey("telemetry.otel"); id != "otel" || !ok {
		t.Errorf("telemetry.otel belongs to %q %v", id, ok)
	}

	// The smallest workflow still links control, and nothing else.
	u, err = catalog.Used(&workflow.Workflow{Nodes: []workflow.Node{{ID: "end", Type: "terminate"}}})
	if err != nil || !reflect.DeepEqual(u.Families, []string{"control"}) {
		t.Errorf("minimal: %v %v", u, err)
	}

	// Unknown names fail closed, naming where they are used.
	_, err = catalog.Used(&workflow.Workflow{
		Nodes:      []workflow.Node{{ID: "x", Type: "teleport"}, {ID: "a", Type: "agent_loop", Tools: []string{"rm_rf"}}},
		HTTPRoutes: []workflow.HTTPRoute{{Method: "GET", Path: "/", Auth: "kerberos:k"}},
	})
	if err == nil || !strings.Contains(err.Error(), `node x: node kind "teleport"`) || !strings.Contains(err.Error(), `route GET /: auth kind "kerberos"`) || !strings.Contains(err.Error(), `node a: tool "rm_rf"`) {
		t.Errorf("unknown kinds: %v", err)
	}
}

func TestTagsRoundTrip(t *testing.T) {
	tags, err := catalog.Tags([]string{"fs", "control", "fs", "data"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tags, []string{"kiln_custom", "kiln_control", "kiln_data", "kiln_fs"}) {
		t.Errorf("tags = %v", tags)
	}
	if got := catalog.FamiliesOfTags(append(tags, "netgo")); !reflect.DeepEqual(got, []string{"control", "data", "fs"}) {
		t.Errorf("families of tags = %v", got)
	}
	if _, err := catalog.Tags([]string{"teleport"}); err == nil || !strings.Contains(err.Error(), `"teleport"`) {
		t.Errorf("unknown family: %v", err)
	}
	for _, c := range []struct {
		pkg, id string
		ok      bool
	}{
		{catalog.PackagePrefix + "llm", "llm", true},
		{catalog.PackagePrefix + "llm/transport", "llm", true},
		{catalog.PackagePrefix + "internal/fire", "", false},
		{catalog.PackagePrefix + "catalog", "", false},
		{"github.com/kilnworks/kiln/runtime", "", false},
	} {
		id, ok := catalog.FamilyOfPackage(c.pkg)
		if id != c.id || ok != c.ok {
			t.Errorf("FamilyOfPackage(%s) = %q %v", c.pkg, id, ok)
		}
	}
	if fk := catalog.FamilyKeys([]string{"fs", "nope"}); !reflect.DeepEqual(fk, map[string][]string{"fs": {"tools.fs"}}) {
		t.Errorf("FamilyKeys = %v", fk)
	}
	keys := catalog.KeysOf([]string{"fs", "httpclient"})
	if !sort.StringsAreSorted(keys) || !reflect.DeepEqual(keys, []string{"tools.fs", "tools.http"}) {
		t.Errorf("keys = %v", keys)
	}
}

// TestCatalogMatchesSpecs: every node kind, trigger type and route auth
// kind of the catalog has a declaration in its family's spec package, and
// every declaration is in the catalog under the same family.
func TestCatalogMatchesSpecs(t *testing.T) {
	for _, f := range catalog.Families {
		for _, k := range f.NodeKinds {
			if d, ok := specs.Kind(k); !ok || d.Family != f.ID {
				t.Errorf("catalog node kind %s (%s) has no declaration in capabilities/%s/spec", k, f.ID, f.ID)
			}
		}
		for _, tr := range f.Triggers {
			if d, ok := specs.Trigger(tr); !ok || d.Family != f.ID {
				t.Errorf("catalog trigger type %s (%s) has no declaration in capabilities/%s/spec", tr, f.ID, f.ID)
			}
		}
		for _, a := range f.AuthKinds {
			if d, ok := specs.Auth(a); !ok || d.Family != f.ID {
				t.Errorf("catalog auth kind %s (%s) has no declaration in capabilities/%s/spec", a, f.ID, f.ID)
			}
		}
	}
	for _, d := range specs.Families() {
		f, ok := catalog.Lookup(d.ID)
		if !ok {
			t.Errorf("spec family %s is not in the catalog", d.ID)
			continue
		}
		for _, k := range d.Kinds {
			if !slices.Contains(f.NodeKinds, k.Name) {
				t.Errorf("declared node kind %s is not in catalog family %s", k.Name, f.ID)
			}
		}
		for _, tr := range d.Triggers {
			if !slices.Contains(f.Triggers, tr.Name) {
				t.Errorf("declared trigger type %s is not in catalog family %s", tr.Name, f.ID)
			}
		}
		for _, a := range d.Auths {
			if !slices.Contains(f.AuthKinds, a.Name) {
				t.Errorf("declared auth kind %s is not in catalog family %s", a.Name, f.ID)
			}
		}
	}
}

// TestUsedSchemas: a route's input_schema or a node's output_schema file,
// in the root or in a child, links the schema family, naming why; a
// workflow without one, or with only output_schema = "inline" (any JSON,
// no schema to compile), does not.
func TestUsedSchemas(t *testing.T) {
	route := func(schema string) []workflow.HTTPRoute {
		return []workflow.HTTPRoute{{Method: "POST", Path: "/hook", Auth: "none", InputSchema: schema}}
	}
	infer := func(schema string) []workflow.Node {
		return []workflow.Node{{ID: "ask", Type: "llm_infer", OutputSchema: schema}}
	}
	for _, c := range []struct {
		name string
		wf   *workflow.Workflow
		why  string // "" = the family is not used
	}{
		{"route input_schema", &workflow.Workflow{HTTPRoutes: route("s.json")}, "route POST /hook (input_schema)"},
		{"node output_schema", &workflow.Workflow{Nodes: infer("label.json")}, "node ask (output_schema)"},
		{"child output_schema", &workflow.Workflow{Nodes: []workflow.Node{{ID: "c", Type: "call", Workflow: "sub.toml"}},
			Children: map[string]*workflow.Workflow{"sub.toml": {Name: "sub", Nodes: infer("label.json")}}}, "sub.toml: node ask (output_schema)"},
		{"route without a schema", &workflow.Workflow{HTTPRoutes: route("")}, ""},
		{"inline output_schema", &workflow.Workflow{Nodes: infer(llmspec.InlineSchema)}, ""},
		{"no output_schema", &workflow.Workflow{Nodes: infer("")}, ""},
	} {
		u, err := catalog.Used(c.wf)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := slices.Contains(u.Families, "schema"); got != (c.why != "") {
			t.Errorf("%s: families %v", c.name, u.Families)
		}
		if got := strings.Join(u.Why["schema"], ";"); got != c.why {
			t.Errorf("%s: why schema = %q, want %q", c.name, got, c.why)
		}
	}
	if id, ok := catalog.FamilyOfPackage(catalog.PackagePrefix + "schema"); id != "schema" || !ok {
		t.Errorf("capabilities/schema belongs to %q %v", id, ok)
	}
}
