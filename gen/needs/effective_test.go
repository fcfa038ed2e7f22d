package needs

import (
	"errors"
	"strings"
	"testing"

	rneeds "github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func mustDecode(t *testing.T, src string) *Catalog {
	t.Helper()
	c, err := Decode("test.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func find(eff *rneeds.Effective, id string) *rneeds.Need {
	for i := range eff.Needs {
		if eff.Needs[i].ID == id {
			return &eff.Needs[i]
		}
	}
	return nil
}

func ids(eff *rneeds.Effective) string {
	var s []string
	for _, n := range eff.Needs {
		s = append(s, n.ID)
	}
	return strings.Join(s, " ")
}

func TestDecodeRejectsUnknownKeysAndBadModes(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":  "[[agent_needs]]\nclass_name = \"x\"\nbogus = 1\n",
		"bad mode":     "[[agent_needs]]\nclass_name = \"x\"\n[agent_needs.needs]\nfilesystem = { allow = [{ path = \"/a\", mode = \"rwx\" }] }\n",
		"no class":     "[[agent_needs]]\n[agent_needs.needs]\nsecrets = [{ key = \"A\" }]\n",
		"dup class":    "[[agent_needs]]\nclass_name = \"x\"\n[[dependency_needs]]\nclass_name = \"x\"\n",
		"no key":       "[[agent_needs]]\nclass_name = \"x\"\n[agent_needs.needs]\nsecrets = [{ label = \"A\" }]\n",
		"bad conflict": "conflict = \"maybe\"\n",
		"syntax":       "[[agent_needs]\n",
	} {
		if _, err := Decode("c.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), "c.toml") {
			t.Errorf("%s: want an error naming the file, got %v", name, err)
		}
	}
}

func TestDecodeUnknownKeyNamesItsLine(t *testing.T) {
	// The second element of an array of tables holds the unknown key: the
	// line is that element's, not the array's first header.
	src := "[[agent_needs]]\nclass_name = \"x\"\n\n[[agent_needs]]\nclass_name = \"y\"\nbogus = 1\n"
	_, err := Decode("c.toml", []byte(src))
	if err == nil || err.Error() != `c.toml:6: unknown key "agent_needs.bogus"` {
		t.Fatalf("err = %v", err)
	}
}

func TestBuiltinParses(t *testing.T) {
	b := Builtin()
	if len(b.DependencyNeeds) == 0 {
		t.Fatal("builtin catalog is empty")
	}
}

func TestMergeDedupesWithProvenance(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Nodes: []workflow.Node{{ID: "a", Type: "llm_infer"}, {ID: "b", Type: "http_request"}},
		Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{{Name: "gpt", Provider: "openai"}}}}
	user := mustDecode(t, `
[[agent_needs]]
class_name = "workflow:w"
[agent_needs.needs]
secrets = [{ key = "OPENAI_API_KEY", label = "again", optional = true }, { key = "EXTRA", optional = true }]
network = { allow = ["API.OPENAI.COM"] }
oauth = [{ provider = "google", scopes = ["b", "a", "a"] }]

[[dependency_needs]]
class_name = "node:http_request"
[dependency_needs.needs]
oauth = [{ provider = "google", scopes = ["a", "b"] }]
capabilities = [{ type = "network" }]
`)
	eff, err := Compute(Input{Workflow: wf, Families: []string{"control", "httpclient", "llm"}, Catalogs: []*Catalog{Builtin(), user}})
	if err != nil {
		t.Fatal(err)
	}
	key := find(eff, "secret:OPENAI_API_KEY")
	if key == nil || key.Optional || strings.Join(key.Sources, ",") != "intelligence:openai,workflow:w" || key.Label != "OpenAI API key" {
		t.Fatalf("secret merge wrong: %+v", key)
	}
	if n := find(eff, "secret:EXTRA"); n == nil || !n.Optional {
		t.Fatalf("optional secret lost: %+v", n)
	}
	host := find(eff, "network:api.openai.com")
	if host == nil || len(host.Sources) != 2 {
		t.Fatalf("network dedupe by host failed: %+v (all: %s)", host, ids(eff))
	}
	o := find(eff, "oauth:google:a,b")
	if o == nil || strings.Join(o.Sources, ",") != "node:http_request,workflow:w" {
		t.Fatalf("oauth dedupe by provider+scope set failed: %s", ids(eff))
	}
	c := find(eff, "capability:network")
	if c == nil || strings.Join(c.Sources, ",") != "family:httpclient,node:http_request" {
		t.Fatalf("capability dedupe failed: %+v", c)
	}
	// Deterministic: canonical JSON identical on recompute.
	a, _ := eff.Canonical()
	eff2, _ := Compute(Input{Workflow: wf, Families: []string{"llm", "httpclient", "control"}, Catalogs: []*Catalog{Builtin(), user}})
	b, _ := eff2.Canonical()
	if string(a) != string(b) {
		t.Fatalf("not deterministic:\n%s\n%s", a, b)
	}
}

func TestProviderKeyOverride(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Intelligence: &workflow.Intelligence{Backends: []workflow.Backend{
		{Name: "local", Provider: "openai", APIKeyEnv: "MY_KEY", BaseURL: "http://llm.internal:8000"}}}}
	eff, err := Compute(Input{Workflow: wf, Families: []string{"llm"}, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	if find(eff, "secret:OPENAI_API_KEY") != nil || find(eff, "secret:MY_KEY") == nil {
		t.Fatalf("api_key_env not honoured: %s", ids(eff))
	}
	if find(eff, "network:llm.internal") == nil || find(eff, "network:api.openai.com") != nil {
		t.Fatalf("base_url not honoured: %s", ids(eff))
	}
}

func TestFilesystemConflictFailsClosed(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Nodes: []workflow.Node{{ID: "a", Type: "read_file"}, {ID: "b", Type: "write_file"}}}
	src := `
[[dependency_needs]]
class_name = "node:read_file"
[dependency_needs.needs]
filesystem = { allow = [{ path = "/data", mode = "ro" }] }
[[dependency_needs]]
class_name = "node:write_file"
[dependency_needs.needs]
filesystem = { allow = [{ path = "/data", mode = "rw" }] }
`
	_, err := Compute(Input{Workflow: wf, Catalogs: []*Catalog{mustDecode(t, src)}})
	var ce *ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "/data") || !strings.Contains(err.Error(), "node:read_file") {
		t.Fatalf("want a conflict naming the path and classes, got %v", err)
	}
	eff, err := Compute(Input{Workflow: wf, Catalogs: []*Catalog{mustDecode(t, "conflict = \"broader\"\n"+src)}})
	if err != nil {
		t.Fatal(err)
	}
	rw := find(eff, "filesystem:/data:rw")
	if rw == nil || find(eff, "filesystem:/data:ro") != nil || len(rw.Sources) != 2 {
		t.Fatalf("broader resolution wrong: %s", ids(eff))
	}
}

func TestPolicyIsTheCeiling(t *testing.T) {
	wf := &workflow.Workflow{Name: "w", Nodes: []workflow.Node{{ID: "h", Type: "http_request"}},
		Policy: &workflow.Policy{
			HTTP: &workflow.HTTPPolicy{URLs: []string{"https://api.example.com/**"}},
			FS:   &workflow.FSPolicy{Read: []string{"/srv/in/**"}, Write: []string{"/srv/out/**"}},
		}}
	src := `
[[agent_needs]]
class_name = "workflow:w"
[agent_needs.needs]
network = { allow = ["api.example.com", "evil.example.net"] }
filesystem = { allow = [{ path = "/srv/in/a", mode = "ro" }, { path = "/srv/in/b", mode = "rw" }, { path = "/etc", mode = "ro" }] }
`
	eff, err := Compute(Input{Workflow: wf, Families: []string{"httpclient", "fs"}, Catalogs: []*Catalog{mustDecode(t, src)}})
	if err != nil {
		t.Fatal(err)
	}
	for id, beyond := range map[string]bool{
		"network:api.example.com":  false,
		"network:evil.example.net": true,
		"filesystem:/srv/in/a:ro":  false,
		"filesystem:/srv/in/b:rw":  true,
		"filesystem:/etc:ro":       true,
		"filesystem:/srv/out:rw":   false, // derived from the policy itself
	} {
		n := find(eff, id)
		if n == nil {
			t.Fatalf("%s missing: %s", id, ids(eff))
		}
		if (n.BeyondPolicy != "") != beyond {
			t.Errorf("%s: beyond_policy = %q, want beyond=%v", id, n.BeyondPolicy, beyond)
		}
	}
}

func TestDerivedNeeds(t *testing.T) {
	child := &workflow.Workflow{Name: "child", MCPServers: []workflow.MCPServer{{Name: "docs", Command: []string{"x"}, Env: map[string]string{"TOKEN": "DOCS_TOKEN"}}}}
	wf := &workflow.Workflow{Name: "w",
		Auth:     &workflow.Auth{HMAC: map[string]workflow.HMACAuth{"gh": {SecretEnv: "GH_SECRET"}}},
		Secrets:  []workflow.Secret{{Name: "sf", Source: "oauth2", TokenURL: "https://login.example.com/token", ClientIDEnv: "SF_ID", ClientSecretEnv: "SF_SECRET"}},
		Children: map[string]*workflow.Workflow{"child.toml": child},
	}
	eff, err := Compute(Input{Workflow: wf, Catalogs: []*Catalog{Builtin()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"secret:GH_SECRET", "secret:SF_ID", "secret:SF_SECRET", "network:login.example.com", "secret:DOCS_TOKEN"} {
		if find(eff, id) == nil {
			t.Errorf("%s missing: %s", id, ids(eff))
		}
	}
	if s := find(eff, "secret:DOCS_TOKEN"); s != nil && s.Sources[0] != "mcp:docs" {
		t.Errorf("provenance of MCP env secret: %v", s.Sources)
	}
}
