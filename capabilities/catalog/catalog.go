// Package catalog is the single source of truth about kiln's capability
// families: which package implements each, its build tag, the node kinds,
// trigger types and route auth kinds it provides (or the workflow block that
// selects it: routes, [[secrets]], [logging.otel], a JSON Schema), and the capability keys
// a workflow may name in requires_capabilities.
//
// The generator, the manifest, the discovery document and `kiln inspect`
// all read Families; nothing else lists capabilities. The package holds
// data only, so it may be linked anywhere (it imports no family).
package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// ModulePath is kiln's Go module; family packages live under it.
const ModulePath = "github.com/kilnworks/kiln"

// PackagePrefix is the import path prefix of every family package.
const PackagePrefix = ModulePath + "/capabilities/"

// TagCustom selects families in capabilities/all: with it, only the
// families whose own tag is set as well are linked. kiln build passes no
// tags (the generated program imports and registers what it uses); binaries
// from an older kiln carry them, and kiln inspect still compares them.
const TagCustom = "kiln_custom"

// Family is one capability family.
type Family struct {
	ID          string   // catalog id, e.g. "fs"
	Package     string   // Go import path
	Tag         string   // build tag kiln_<id>
	Description string   // one line
	NodeKinds   []string // [[nodes]] types
	// KindPackages maps a node kind to the package that declares it when
	// that is not Package: a kind whose code would weigh on every binary
	// linking the family (a large dependency) lives in its own package,
	// which only binaries whose workflow uses that kind import.
	KindPackages map[string]string
	Triggers     []string // [[triggers]] types
	AuthKinds    []string // http_routes auth kinds
	Keys         []string // requires_capabilities keys it provides
	// Always marks a family every sealed binary links (the control flow
	// kinds every workflow may use).
	Always bool
	// Routes marks the family that serves [[http_routes]].
	Routes bool
	// Secrets marks the family that resolves [[secrets]] entries.
	Secrets bool
	// Telemetry marks the family that exports [logging.otel] traces.
	Telemetry bool
	// Rego marks the family that evaluates [policy.rego].
	Rego bool
	// Confines marks the family that confines a binary with a [policy]
	// to it with Landlock at start-up ([sandbox]).
	Confines bool
	// State marks the family that shares state on PostgreSQL
	// ([state] backend = "postgres").
	State bool
	// Schemas marks the family that validates JSON Schemas: route
	// input_schema and llm output_schema.
	Schemas bool
}

// Families is the catalog, in a fixed order (the order of the table).
var Families = []Family{
	{
		ID: "control", Package: PackagePrefix + "control", Tag: "kiln_control",
		Description: "control flow: branches, merges, ends, HTTP replies and approval pauses",
		NodeKinds:   []string{"condition", "switch", "merge", "fail", "terminate", "respond", "pause_for_approval"},
		Keys:        []string{"flow.approval", "flow.control"},
		Always:      true,
	},
	{
		ID: "data", Package: PackagePrefix + "data", Tag: "kiln_data",
		Description: "pure JSON transforms: parse, select, render templates, diff",
		NodeKinds:   []string{"parse_json", "json_select", "template_render", "diff_compute"},
		// parse_json's decoder (jsontext) would add its package
		// initialisation to every binary rendering a template.
		KindPackages: map[string]string{"parse_json": PackagePrefix + "data/parsejson"},
		Keys:         []string{"data.diff", "data.json", "data.template"},
	},
	{
		ID: "fs", Package: PackagePrefix + "fs", Tag: "kiln_fs",
		Description: "policy-checked file reads, writes and directory creation",
		NodeKinds:   []string{"read_file", "write_file", "create_dir"},
		Keys:        []string{"tools.fs"},
	},
	{
		ID: "env", Package: PackagePrefix + "env", Tag: "kiln_env",
		Description: "policy-checked environment variable reads",
		NodeKinds:   []string{"read_env"},
		Keys:        []string{"tools.env"},
	},
	{
		ID: "llm", Package: PackagePrefix + "llm", Tag: "kiln_llm",
		Description: "intelligence backends: single completions and bounded agent loops",
		NodeKinds:   []string{"llm_infer", "agent_loop"},
		Keys:        []string{"llm.agent", "llm.infer"},
	},
	{
		ID: "mcp", Package: PackagePrefix + "mcp", Tag: "kiln_mcp",
		Description: "MCP servers: tool calls, resource reads and resource triggers",
		NodeKinds:   []string{"call_mcp_tool", "read_mcp_resource"},
		Triggers:    []string{"mcp.resource.created", "mcp.resource.updated"},
		Keys:        []string{"mcp.resources", "mcp.tools", "trigger.mcp"},
	},
	{
		ID: "http", Package: PackagePrefix + "http", Tag: "kiln_http",
		Description: "serve mode: HTTP routes with bearer, basic, HMAC and mTLS auth",
		AuthKinds:   []string{"basic", "bearer", "hmac", "mtls"},
		Keys:        []string{"auth.basic", "auth.bearer", "auth.hmac", "auth.mtls", "serve.http"},
		Routes:      true,
	},
	{
		ID: "oidc", Package: PackagePrefix + "oidc", Tag: "kiln_oidc",
		Description: "OIDC bearer-token route auth against a pinned JWKS",
		AuthKinds:   []string{"oidc"},
		Keys:        []string{"auth.oidc"},
	},
	{
		ID: "httpclient", Package: PackagePrefix + "httpclient", Tag: "kiln_httpclient",
		Description: "policy-checked outbound HTTP requests",
		NodeKinds:   []string{"http_request"},
		Keys:        []string{"tools.http"},
	},
	{
		ID: "shell", Package: PackagePrefix + "shell", Tag: "kiln_shell",
		Description: "policy-checked commands run without a shell",
		NodeKinds:   []string{"shell_run"},
		Keys:        []string{"tools.shell"},
	},
	{
		ID: "compose", Package: PackagePrefix + "compose", Tag: "kiln_compose",
		Description: "child workflows: call, parallel branches and bounded map",
		NodeKinds:   []string{"call", "parallel", "map"},
		Keys:        []string{"flow.compose"},
	},
	{
		ID: "cron", Package: PackagePrefix + "cron", Tag: "kiln_cron",
		Description: "cron schedule triggers",
		Triggers:    []string{"cron"},
		Keys:        []string{"trigger.cron"},
	},
	{
		ID: "interval", Package: PackagePrefix + "interval", Tag: "kiln_interval",
		Description: "fixed interval triggers",
		Triggers:    []string{"interval"},
		Keys:        []string{"trigger.interval"},
	},
	{
		ID: "fswatch", Package: PackagePrefix + "fswatch", Tag: "kiln_fswatch",
		Description: "filesystem change triggers",
		Triggers:    []string{"fs_watch"},
		Keys:        []string{"trigger.fs_watch"},
	},
	{
		ID: "event", Package: PackagePrefix + "event", Tag: "kiln_event",
		Description: "internal events: emit_event nodes firing internal.event triggers",
		NodeKinds:   []string{"emit_event"},
		Triggers:    []string{"internal.event"},
		Keys:        []string{"events.emit", "trigger.event"},
	},
	{
		ID: "secrets", Package: PackagePrefix + "secrets", Tag: "kiln_secrets",
		Description: "the [[secrets]] registry: env, file, command and OAuth2 sources",
		Keys:        []string{"secrets.oauth2", "secrets.registry"},
		Secrets:     true,
	},
	{
		ID: "otel", Package: PackagePrefix + "otel", Tag: "kiln_otel",
		Description: "[logging.otel]: OpenTelemetry trace export of runs and node attempts over OTLP",
		Keys:        []string{"telemetry.otel"},
		Telemetry:   true,
	},
	{
		ID: "sandbox", Package: PackagePrefix + "sandbox", Tag: "kiln_sandbox",
		Description: "[sandbox]: Landlock self-confinement of a binary with a [policy] (file system, TCP ports, scoping)",
		Keys:        []string{"sandbox.landlock"},
		Confines:    true,
	},
	{
		ID: "rego", Package: PackagePrefix + "rego", Tag: "kiln_rego",
		Description: "[policy.rego]: a Rego policy (Open Policy Agent) every allowed tool decision must also satisfy",
		Keys:        []string{"policy.rego"},
		Rego:        true,
	},
	{
		ID: "pgstate", Package: PackagePrefix + "pgstate", Tag: "kiln_pgstate",
		Description: "[state] backend = \"postgres\": idempotency claims and replies, and cron/interval ticks, shared by every replica on one PostgreSQL database",
		Keys:        []string{"state.postgres"},
		State:       true,
	},
	{
		ID: "schema", Package: PackagePrefix + "schema", Tag: "kiln_schema",
		Description: "JSON Schema validation of route input_schema and llm output_schema, offline (no $ref leaves the document)",
		Keys:        []string{"schema.validate"},
		Schemas:     true,
	},
}

// index maps ids, node kinds, trigger types, auth kinds and capability
// keys to their family.
type index struct{ byID, byKind, byTrigger, byAuth, byKey map[string]*Family }

// indexes is built from Families on first use, not at start-up: a serve
// binary links the catalog for its discovery document, which few
// requests ask for.
var indexes = sync.OnceValue(func() index {
	ix := index{map[string]*Family{}, map[string]*Family{}, map[string]*Family{}, map[string]*Family{}, map[string]*Family{}}
	for i := range Families {
		f := &Families[i]
		ix.byID[f.ID] = f
		for _, k := range f.NodeKinds {
			ix.byKind[k] = f
		}
		for _, t := range f.Triggers {
			ix.byTrigger[t] = f
		}
		for _, a := range f.AuthKinds {
			ix.byAuth[a] = f
		}
		for _, k := range f.Keys {
			ix.byKey[k] = f
			ix.byKey[WireKey(k)] = f // a workflow may require the OpenWOP identifier
		}
	}
	return ix
})

// Lookup returns the family with catalog id id.
func Lookup(id string) (Family, bool) {
	f, ok := indexes().byID[id]
	if !ok {
		return Family{}, false
	}
	return *f, true
}

// KindPackage returns the import path of the package declaring node kind
// k of family f: its own package if KindPackages names one, else the
// family's.
func (f Family) KindPackage(k string) string {
	if p, ok := f.KindPackages[k]; ok {
		return p
	}
	return f.Package
}

// KindPackageList returns every package declaring a node kind of f: the
// family's first if any kind stays there, then its kind packages, sorted.
func (f Family) KindPackageList() []string {
	var own []string
	inFamily := false
	for _, k := range f.NodeKinds {
		p := f.KindPackage(k)
		if p == f.Package {
			inFamily = true
		} else if !slices.Contains(own, p) {
			own = append(own, p)
		}
	}
	sort.Strings(own)
	if inFamily {
		return append([]string{f.Package}, own...)
	}
	return own
}

// FamilyOfKind returns the id of the family providing node kind k.
func FamilyOfKind(k string) (string, bool) { return idOf(indexes().byKind[k]) }

// FamilyOfTrigger returns the id of the family providing trigger type t.
func FamilyOfTrigger(t string) (string, bool) { return idOf(indexes().byTrigger[t]) }

// FamilyOfAuth returns the id of the family providing route auth kind a.
func FamilyOfAuth(a string) (string, bool) { return idOf(indexes().byAuth[a]) }

// FamilyOfKey returns the id of the family providing capability key k,
// given as a catalog key or as its OpenWOP identifier (WireKey).
func FamilyOfKey(k string) (string, bool) { return idOf(indexes().byKey[k]) }

func idOf(f *Family) (string, bool) {
	if f == nil {
		return "", false
	}
	return f.ID, true
}

// IDs returns every family id in table order.
func IDs() []string {
	out := make([]string, len(Families))
	for i, f := range Families {
		out[i] = f.ID
	}
	return out
}

// NodeKinds returns every node kind of the catalog, sorted.
func NodeKinds() []string {
	var out []string
	for _, f := range Families {
		out = append(out, f.NodeKinds...)
	}
	sort.Strings(out)
	return out
}

// Keys returns every capability key of the catalog, sorted.
func Keys() []string {
	var out []string
	for _, f := range Families {
		out = append(out, f.Keys...)
	}
	sort.Strings(out)
	return out
}

// Sort orders family ids by their position in the table (the order every
// list of families uses) and drops duplicates. Unknown ids are an error.
func Sort(ids []string) ([]string, error) {
	pos := map[string]int{}
	for i, f := range Families {
		pos[f.ID] = i
	}
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if _, ok := pos[id]; !ok {
			return nil, fmt.Errorf("unknown capability family %q (known: %s)", id, strings.Join(IDs(), ", "))
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return pos[out[i]] < pos[out[j]] })
	return out, nil
}

// Tags returns the build tags of a pruned build linking families:
// kiln_custom followed by kiln_<id> of each, in table order.
func Tags(families []string) ([]string, error) {
	ids, err := Sort(families)
	if err != nil {
		return nil, err
	}
	out := []string{TagCustom}
	for _, id := range ids {
		out = append(out, indexes().byID[id].Tag)
	}
	return out, nil
}

// FamiliesOfTags is the inverse of Tags: the family ids whose tags appear
// in tags (other tags are ignored), in table order.
func FamiliesOfTags(tags []string) []string {
	set := map[string]bool{}
	for _, t := range tags {
		set[t] = true
	}
	var out []string
	for _, f := range Families {
		if set[f.Tag] {
			out = append(out, f.ID)
		}
	}
	return out
}

// FamilyOfPackage returns the family whose package is path or contains it
// (a family's internal sub-packages belong to it).
func FamilyOfPackage(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, PackagePrefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "/")
	return idOf(indexes().byID[id])
}

// FamilyKeys maps each known family id of ids to the capability keys it
// provides: the shape the discovery document's Families takes.
func FamilyKeys(ids []string) map[string][]string {
	out := map[string][]string{}
	for _, id := range ids {
		if f, ok := indexes().byID[id]; ok {
			out[id] = append([]string{}, f.Keys...)
		}
	}
	return out
}
