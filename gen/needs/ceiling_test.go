package needs

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestCeilingSkipsAccessThePolicyDoesNotGovern: an intelligence provider's
// host, an MCP server URL, a secret file and an OAuth2 token host are
// reached by kiln itself, not through http_request or the fs nodes, so a
// [policy] without them does not make them unmeetable. The same host asked
// by a governed class is still checked.
func TestCeilingSkipsAccessThePolicyDoesNotGovern(t *testing.T) {
	wf := &workflow.Workflow{Name: "w",
		Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{{Name: "gpt", Provider: "openai", Model: "m"}}},
		Secrets: []workflow.Secret{
			{Name: "key", Source: "file", Path: "/run/secrets/key"},
			{Name: "sf", Source: "oauth2", TokenURL: "https://login.example.com/token", ClientIDEnv: "SF_ID", ClientSecretEnv: "SF_SECRET"},
		},
		Policy: &workflow.Policy{FS: &workflow.FSPolicy{Read: []string{"/srv/in/**"}}},
	}
	user := mustDecode(t, `
[[agent_needs]]
class_name = "workflow:w"
[agent_needs.needs]
network = { allow = ["login.example.com"] }
`)
	eff, err := Compute(Input{Workflow: wf, Families: []string{"llm", "secrets"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"network:api.openai.com", "filesystem:/run/secrets/key:ro", "network:login.example.com"} {
		n := find(eff, id)
		if n == nil {
			t.Fatalf("%s missing: %s", id, ids(eff))
		}
		if n.BeyondPolicy != "" {
			t.Errorf("%s: beyond_policy %q for access the policy does not govern", id, n.BeyondPolicy)
		}
	}
	// A workflow-level catalog entry asking the same host is governed.
	eff, err = Compute(Input{Workflow: wf, Families: []string{"llm", "secrets"}, Catalogs: []*Catalog{Builtin(), user}})
	if err != nil {
		t.Fatal(err)
	}
	if n := find(eff, "network:login.example.com"); n == nil || n.BeyondPolicy == "" {
		t.Fatalf("governed ask not checked against the policy: %+v", n)
	}
}

// TestOTelEndpointNeed: the [logging.otel] endpoint's host (of the root or
// a child workflow) is a network need when the otel family is linked. It
// is operator configuration kiln reaches itself, so a [policy.http] that
// does not list it leaves it within the ceiling; without the family (a
// degraded build) or without an endpoint there is no such need.
func TestOTelEndpointNeed(t *testing.T) {
	otel := func(endpoint string) *workflow.Logging {
		return &workflow.Logging{OTel: &workflow.OTelLog{Endpoint: endpoint, Protocol: "grpc"}}
	}
	child := &workflow.Workflow{Name: "child", Logging: otel("https://Traces.Example.com:4317")}
	wf := &workflow.Workflow{Name: "w", Logging: otel("http://collector.internal:4318/v1/traces"),
		Children: map[string]*workflow.Workflow{"child.toml": child},
		Policy:   &workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/**"}}}}
	eff, err := Compute(Input{Workflow: wf, Families: []string{"control", "httpclient", "otel"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"network:collector.internal", "network:traces.example.com"} {
		n := find(eff, id)
		if n == nil {
			t.Fatalf("%s missing: %s", id, ids(eff))
		}
		if n.BeyondPolicy != "" || n.Optional || len(n.Sources) != 1 || n.Sources[0] != "family:otel" {
			t.Errorf("%s: %+v", id, n)
		}
	}
	if n := find(eff, "network:api.example.com"); n == nil {
		t.Errorf("the policy host is still a need: %s", ids(eff))
	}

	eff, err = Compute(Input{Workflow: wf, Families: []string{"control", "httpclient"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ids(eff), "collector.internal") {
		t.Errorf("a binary without the otel family needs its collector: %s", ids(eff))
	}
	wf.Logging, wf.Children = otel(""), nil
	eff, err = Compute(Input{Workflow: wf, Families: []string{"control", "otel"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil || strings.Contains(ids(eff), "network:") {
		t.Errorf("no endpoint: %s (%v)", ids(eff), err)
	}
}

// An openai-compatible backend has no built-in key or host: the backend's
// own api_key_env and base_url are its needs, outside the policy ceiling.
func TestOpenAICompatibleBackendNeeds(t *testing.T) {
	wf := &workflow.Workflow{Name: "w",
		Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{
			{Name: "local", Provider: "openai-compatible", Model: "m", BaseURL: "http://LLM.internal:8000/v1", APIKeyEnv: "LOCAL_LLM_KEY"},
			{Name: "open", Provider: "openai-compatible", Model: "m", BaseURL: "http://127.0.0.1:11434/v1"},
		}},
		Policy: &workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/**"}}}}
	eff, err := Compute(Input{Workflow: wf, Families: []string{"control", "llm"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"secret:LOCAL_LLM_KEY", "network:llm.internal", "network:127.0.0.1"} {
		n := find(eff, id)
		if n == nil {
			t.Fatalf("%s missing: %s", id, ids(eff))
		}
		if n.BeyondPolicy != "" || n.Optional || len(n.Sources) != 1 || n.Sources[0] != "intelligence:openai-compatible" {
			t.Errorf("%s: %+v", id, n)
		}
	}
	if strings.Count(ids(eff), "secret:") != 1 {
		t.Errorf("a backend without api_key_env needs no key: %s", ids(eff))
	}
	eff, err = Compute(Input{Workflow: wf, Families: []string{"control"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil || strings.Contains(ids(eff), "LOCAL_LLM_KEY") {
		t.Errorf("without the llm family: %s (%v)", ids(eff), err)
	}
}
