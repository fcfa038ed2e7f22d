package http

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/capabilities/http/openwoptest"
	"github.com/kilnworks/kiln/runtime/discovery"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func validDoc(t *testing.T, s *jsonschema.Schema, r resp) map[string]any {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("reply does not match the OpenWOP schema: %v\n%s", err, r.body)
	}
	return doc.(map[string]any)
}

// TestOpenWOPDocuments fetches the OpenWOP discovery document, the agent
// inventory and the agent by id over real HTTP and validates them against
// the published schemas; a key the binary advertises, in either form, is
// never degraded, and degraded is omitted when every requirement is met.
func TestOpenWOPDocuments(t *testing.T) {
	caps := openwoptest.Compile(t, openwoptest.Capabilities)
	inv := openwoptest.Compile(t, openwoptest.AgentInventory)
	entry := openwoptest.Compile(t, openwoptest.AgentInventory+"#/$defs/AgentInventoryEntry")
	for _, tc := range []struct {
		requires string
		degraded []any
	}{
		{"", nil},
		{`requires_capabilities = ["serve.http", "x-host-kiln-serve-http"]`, nil},
		{`requires_capabilities = ["x-host-kiln-serve-http", "host.workspace"]`, []any{"host.workspace"}},
	} {
		ts := start(t, tc.requires+"\n"+wf("echo", ""), setup{})

		d := validDoc(t, caps, ts.do(t, "GET", "/.well-known/openwop", "").expect(t, 200))
		adv, _ := d["runtimeCapabilities"].([]any)
		if !slices.Contains(adv, any("x-host-kiln-serve-http")) || slices.Contains(adv, any("serve.http")) {
			t.Fatalf("runtimeCapabilities = %v, want the OpenWOP form of serve.http", adv)
		}
		lim := d["limits"].(map[string]any)
		if lim["maxNodeExecutions"] != float64(10000) || lim["clarificationRounds"] != float64(0) {
			t.Fatalf("limits = %v", lim)
		}
		if d["agents"].(map[string]any)["manifestRuntime"].(map[string]any)["supported"] != true {
			t.Fatalf("agents.manifestRuntime.supported must be true: %v", d["agents"])
		}

		list := validDoc(t, inv, ts.do(t, "GET", "/v1/agents", "").expect(t, 200))
		a := list["agents"].([]any)[0].(map[string]any)
		if list["total"] != float64(1) || a["agentId"] != "local.kiln.hooks" || a["persona"] != "hooks" ||
			!reflect.DeepEqual(a["toolAllowlist"], []any{"kilnworks.kiln:httptest_node"}) || a["hasHandoffSchemas"] != false {
			t.Fatalf("inventory = %v", list)
		}
		got, present := a["degraded"]
		if tc.degraded == nil && present {
			t.Fatalf("degraded must be omitted when every requirement is met: %v", a)
		}
		if tc.degraded != nil && !reflect.DeepEqual(got, tc.degraded) {
			t.Fatalf("degraded = %v, want %v", got, tc.degraded)
		}

		one := validDoc(t, entry, ts.do(t, "GET", "/v1/agents/local.kiln.hooks", "").expect(t, 200))
		if !reflect.DeepEqual(one, a) {
			t.Fatalf("GET /v1/agents/{id} = %v, want the inventory entry %v", one, a)
		}
		nf := ts.do(t, "GET", "/v1/agents/local.kiln.other", "").expect(t, 404)
		if e, _ := nf.at("error").(map[string]any); e["code"] != "agent_not_found" || nf.at("error.details.agentId") != "local.kiln.other" {
			t.Fatalf("unknown agent: %s", nf.body)
		}
		ts.do(t, "POST", "/v1/agents/local.kiln.hooks", "").expect(t, 405)
	}
}

// A route cannot shadow the OpenWOP endpoints.
func TestOpenWOPPathsReserved(t *testing.T) {
	for _, path := range []string{"/.well-known/openwop", "/v1/agents/x"} {
		h := newHost(t, wf("echo", "")+"\n[[http_routes]]\nmethod = \"POST\"\npath = \""+path+"\"\nstart_node = \"main\"\n", setup{})
		if _, err := New(h, Config{}); err == nil {
			t.Errorf("a route on %s was accepted", path)
		}
	}
}

func TestAgentID(t *testing.T) {
	for in, want := range map[string]string{"triage": "local.kiln.triage", "My Flow.v2": "local.kiln.my-flow-v2", "9lives": "local.kiln.w9lives", "": "local.kiln.w"} {
		if got := agentID(in); got != want {
			t.Errorf("agentID(%q) = %q, want %q", in, got, want)
		}
	}
}

// The tool allowlist advertises only what the binary can invoke: node
// kinds with a handler, and MCP tools only when the mcp family is linked
// and [policy.mcp] admits them (no [policy.mcp]: none, deny by default).
func TestToolAllowlist(t *testing.T) {
	mk := func(pol *workflow.Policy) discovery.Info {
		return discovery.Info{
			Workflow: &workflow.Workflow{Name: "w",
				Nodes:      []workflow.Node{{ID: "a", Type: "httptest_node"}, {ID: "b", Type: "no_such_kind", Tools: []string{"httptest_node", "other_missing"}}},
				MCPServers: []workflow.MCPServer{{Name: "docs", AllowTools: []string{"search", "fetch_*"}}, {Name: "admin", AllowTools: []string{"drop"}}},
				Policy:     pol},
			Families: map[string][]string{"mcp": {"mcp.tools"}},
		}
	}
	kinds := []string{"kilnworks.kiln:httptest_node"}
	for name, tc := range map[string]struct {
		info discovery.Info
		want []string
	}{
		"no policy":       {mk(nil), kinds},
		"no mcp policy":   {mk(&workflow.Policy{}), kinds},
		"no tools":        {mk(&workflow.Policy{MCP: &workflow.MCPPolicy{Servers: []string{"docs"}}}), kinds},
		"server admitted": {mk(&workflow.Policy{MCP: &workflow.MCPPolicy{Servers: []string{"docs"}, Tools: []string{"*"}}}), append([]string{"kilnworks.kiln:httptest_node"}, "mcp:docs/fetch_*", "mcp:docs/search")},
		"tool admitted":   {mk(&workflow.Policy{MCP: &workflow.MCPPolicy{Tools: []string{"search", "drop"}}}), append([]string{"kilnworks.kiln:httptest_node"}, "mcp:admin/drop", "mcp:docs/search")},
		"mcp not linked": {func() discovery.Info {
			in := mk(&workflow.Policy{MCP: &workflow.MCPPolicy{Tools: []string{"*"}}})
			in.Families = nil
			return in
		}(), kinds},
	} {
		if got := toolAllowlist(tc.info); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: toolAllowlist = %v, want %v", name, got, tc.want)
		}
	}
}

func TestAgentProjection(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", RequiresCapabilities: []string{"host.mcp", "tools.fs", "host.workspace"}}
	in := discovery.Info{Workflow: wf, Families: map[string][]string{"mcp": {"mcp.tools"}},
		BuildDegraded: []string{"tools.fs", "tools.http", "host.workspace"}, WireKey: catalog.WireKey}
	// host.mcp is met by mcp.tools; tools.fs is listed as written; the
	// left-out tools.http in its OpenWOP form; host.workspace once.
	if got := agentDegraded(in); !reflect.DeepEqual(got, []string{"host.workspace", "tools.fs", "x-host-kiln-tools-http"}) {
		t.Errorf("degraded = %v", got)
	}
	if modelClass(wf) != "general" || hasHandoffSchemas(wf) {
		t.Errorf("plain workflow: %s %v", modelClass(wf), hasHandoffSchemas(wf))
	}
	child := &workflow.Workflow{Name: "c", Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{{Name: "m"}}},
		Nodes: []workflow.Node{{ID: "l", Type: "agent_loop", OutputSchema: "out.json"}}}
	wf.Children = map[string]*workflow.Workflow{"c.toml": child}
	if modelClass(wf) != "reasoning" || !hasHandoffSchemas(wf) {
		t.Errorf("agent loop child: %s %v", modelClass(wf), hasHandoffSchemas(wf))
	}
}
