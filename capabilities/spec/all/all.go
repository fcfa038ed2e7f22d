// Package all is the registry of every capability family's specification:
// one import per family, in the capability catalog's order. The generator
// validates through it and docs/reference.md is generated from it; a
// sealed binary never links it.
package all

import (
	"maps"
	"slices"
	"sync"

	"github.com/kilnworks/kiln/capabilities/spec"

	compose "github.com/kilnworks/kiln/capabilities/compose/spec"
	control "github.com/kilnworks/kiln/capabilities/control/spec"
	cron "github.com/kilnworks/kiln/capabilities/cron/spec"
	data "github.com/kilnworks/kiln/capabilities/data/spec"
	env "github.com/kilnworks/kiln/capabilities/env/spec"
	event "github.com/kilnworks/kiln/capabilities/event/spec"
	fs "github.com/kilnworks/kiln/capabilities/fs/spec"
	fswatch "github.com/kilnworks/kiln/capabilities/fswatch/spec"
	http "github.com/kilnworks/kiln/capabilities/http/spec"
	httpclient "github.com/kilnworks/kiln/capabilities/httpclient/spec"
	interval "github.com/kilnworks/kiln/capabilities/interval/spec"
	llm "github.com/kilnworks/kiln/capabilities/llm/spec"
	mcp "github.com/kilnworks/kiln/capabilities/mcp/spec"
	oidc "github.com/kilnworks/kiln/capabilities/oidc/spec"
	otel "github.com/kilnworks/kiln/capabilities/otel/spec"
	pgstate "github.com/kilnworks/kiln/capabilities/pgstate/spec"
	rego "github.com/kilnworks/kiln/capabilities/rego/spec"
	sandbox "github.com/kilnworks/kiln/capabilities/sandbox/spec"
	secrets "github.com/kilnworks/kiln/capabilities/secrets/spec"
	shell "github.com/kilnworks/kiln/capabilities/shell/spec"
)

// declared lists every family's declaration in catalog order.
var declared = []*spec.Family{
	&control.Family, &data.Family, &fs.Family, &env.Family, &llm.Family, &mcp.Family,
	&http.Family, &oidc.Family, &httpclient.Family, &shell.Family, &compose.Family,
	&cron.Family, &interval.Family, &fswatch.Family, &event.Family, &secrets.Family, &otel.Family, &sandbox.Family,
	&rego.Family, &pgstate.Family,
}

type registry struct {
	families []spec.Family
	kinds    map[string]spec.Kind
	triggers map[string]spec.Trigger
	auths    map[string]spec.Auth
}

// index copies the declarations once, with each kind, trigger and auth
// kind stamped with its family's id.
var index = sync.OnceValue(func() *registry {
	r := &registry{kinds: map[string]spec.Kind{}, triggers: map[string]spec.Trigger{}, auths: map[string]spec.Auth{}}
	for _, d := range declared {
		f := *d
		f.Kinds = slices.Clone(f.Kinds)
		for i := range f.Kinds {
			f.Kinds[i].Family = f.ID
			r.kinds[f.Kinds[i].Name] = f.Kinds[i]
		}
		f.Triggers = slices.Clone(f.Triggers)
		for i := range f.Triggers {
			f.Triggers[i].Family = f.ID
			r.triggers[f.Triggers[i].Name] = f.Triggers[i]
		}
		f.Auths = slices.Clone(f.Auths)
		for i := range f.Auths {
			f.Auths[i].Family = f.ID
			r.auths[f.Auths[i].Name] = f.Auths[i]
		}
		r.families = append(r.families, f)
	}
	return r
})

// Families returns every family's declaration, in catalog order.
func Families() []spec.Family { return index().families }

// Kind returns the declaration of node kind name.
func Kind(name string) (spec.Kind, bool) { k, ok := index().kinds[name]; return k, ok }

// Trigger returns the declaration of trigger type name.
func Trigger(name string) (spec.Trigger, bool) { t, ok := index().triggers[name]; return t, ok }

// Auth returns the declaration of route auth kind name.
func Auth(name string) (spec.Auth, bool) { a, ok := index().auths[name]; return a, ok }

// Kinds lists every declared node kind name, sorted.
func Kinds() []string { return slices.Sorted(maps.Keys(index().kinds)) }

// Triggers lists every declared trigger type name, sorted.
func Triggers() []string { return slices.Sorted(maps.Keys(index().triggers)) }

// Auths lists every declared auth kind in catalog order.
func Auths() []spec.Auth {
	var out []spec.Auth
	for _, f := range Families() {
		out = append(out, f.Auths...)
	}
	return out
}
