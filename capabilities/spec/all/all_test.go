package all_test

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/all" // every family's handlers
	secretsspec "github.com/kilnworks/kiln/capabilities/secrets/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/all"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// emptyContext answers every question with "nothing is declared or
// missing", so a check reports only what the checked value lacks.
type emptyContext struct{}

func (emptyContext) Workflow() *workflow.Workflow               { return &workflow.Workflow{} }
func (emptyContext) File(string, string) ([]byte, []spec.Issue) { return nil, nil }
func (emptyContext) Schema(string, string) []spec.Issue         { return nil }
func (emptyContext) Child(string, string) []spec.Issue          { return nil }

var requiredRe = regexp.MustCompile(`^([a-z_]+) is required$`)

// missing lists the keys a check reports as missing_field.
func missing(issues []spec.Issue) []string {
	var out []string
	for _, is := range issues {
		if m := requiredRe.FindStringSubmatch(is.Message); is.Code == "missing_field" && m != nil {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

func required(keys []spec.Key) []string {
	var out []string
	for _, k := range keys {
		if k.Required {
			out = append(out, k.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestRequiredKeysMatchChecks: a key documented as required is exactly a
// key the check reports missing on an empty node or trigger, so the
// reference cannot drift from the rule.
func TestRequiredKeysMatchChecks(t *testing.T) {
	for _, name := range all.Kinds() {
		k, _ := all.Kind(name)
		got := missing(k.Check(&workflow.Node{ID: "n", Type: name}, emptyContext{}))
		if want := required(k.Keys); !slices.Equal(got, want) {
			t.Errorf("node kind %s: Check reports missing %v, Keys mark required %v", name, got, want)
		}
	}
	for _, name := range all.Triggers() {
		tr, _ := all.Trigger(name)
		got := missing(tr.Check(&workflow.Trigger{Type: name}, emptyContext{}))
		if want := required(tr.Keys); !slices.Equal(got, want) {
			t.Errorf("trigger type %s: Check reports missing %v, Keys mark required %v", name, got, want)
		}
	}
	for _, a := range all.Auths() {
		if a.Bindings == nil {
			continue
		}
		auth := &workflow.Auth{}
		// An empty binding of this kind, named "b".
		f := authField(t, a.Name)
		m := reflect.MakeMap(f.Type)
		m.SetMapIndex(reflect.ValueOf("b"), reflect.New(f.Type.Elem()).Elem())
		reflect.ValueOf(auth).Elem().FieldByIndex(f.Index).Set(m)
		got := missing(a.Check(auth, "b", emptyContext{}))
		if want := required(a.Keys); !slices.Equal(got, want) {
			t.Errorf("auth kind %s: Check reports missing %v, Keys mark required %v", a.Name, got, want)
		}
	}
}

// TestKeysAreFields: every declared key is a TOML key of the struct the
// loader decodes it into, so the generator never refuses a declared key
// (or lets an undeclared one through).
func TestKeysAreFields(t *testing.T) {
	check := func(what string, typ reflect.Type, keys []spec.Key) {
		tags := tomlTags(typ)
		for _, k := range keys {
			if !slices.Contains(tags, k.Name) {
				t.Errorf("%s: key %q is not a field of %s", what, k.Name, typ)
			}
			if k.Type == "" || k.Doc == "" {
				t.Errorf("%s: key %q has no type or doc", what, k.Name)
			}
		}
	}
	for _, name := range all.Kinds() {
		k, _ := all.Kind(name)
		check("node kind "+name, reflect.TypeFor[workflow.Node](), k.Keys)
	}
	for _, name := range all.Triggers() {
		tr, _ := all.Trigger(name)
		check("trigger type "+name, reflect.TypeFor[workflow.Trigger](), tr.Keys)
	}
	for _, a := range all.Auths() {
		if a.Bindings != nil {
			check("auth kind "+a.Name, authField(t, a.Name).Type.Elem(), a.Keys)
		}
	}
	for _, src := range secretsspec.Sources {
		check("secret source "+src.Name, reflect.TypeFor[workflow.Secret](), src.Keys)
	}
}

// TestDeclarationsAreComplete: what the reference prints is there.
func TestDeclarationsAreComplete(t *testing.T) {
	for _, name := range all.Kinds() {
		k, _ := all.Kind(name)
		if k.Doc == "" || k.Output == "" || k.Check == nil {
			t.Errorf("node kind %s lacks a doc, output or check", name)
		}
	}
	for _, name := range all.Triggers() {
		tr, _ := all.Trigger(name)
		if tr.Doc == "" || tr.Payload == "" || tr.Check == nil {
			t.Errorf("trigger type %s lacks a doc, payload or check", name)
		}
	}
	for _, a := range all.Auths() {
		if a.Doc == "" || (a.Bindings != nil) != (a.Check != nil) || (a.Bindings == nil && a.Route == nil) {
			t.Errorf("auth kind %s: a doc, and a binding check or a route check, are required", a.Name)
		}
	}
}

// TestPrepareCallsCheck: a node compiled without the generator (as a
// hand-built or sealed workflow is) fails with the same messages the
// generator reports, because the family's Prepare calls its spec's check.
func TestPrepareCallsCheck(t *testing.T) {
	for _, name := range all.Kinds() {
		k, _ := all.Kind(name)
		n := workflow.Node{ID: "n", Type: name}
		want := spec.Err(k.Check(&n, spec.ForWorkflow(&workflow.Workflow{})))
		if want == nil {
			continue // nothing to refuse on an empty node
		}
		_, err := runtime.Compile(&workflow.Workflow{Name: "w", Nodes: []workflow.Node{n}}, runtime.CompileOptions{})
		if prefix := fmt.Sprintf("node n (%s): ", name); err == nil || !strings.Contains(err.Error(), prefix+want.Error()) {
			t.Errorf("%s: Compile error %v, want %q", name, err, prefix+want.Error())
		}
	}
}

func tomlTags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ",")
		out = append(out, name)
	}
	return out
}

// authField is the [auth] field holding the bindings of kind.
func authField(t *testing.T, kind string) reflect.StructField {
	t.Helper()
	typ := reflect.TypeFor[workflow.Auth]()
	for i := range typ.NumField() {
		if f := typ.Field(i); f.Tag.Get("toml") == kind {
			return f
		}
	}
	t.Fatalf("workflow.Auth has no [auth.%s] field", kind)
	return reflect.StructField{}
}
