package needs

import (
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
