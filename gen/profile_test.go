package gen_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/needs"
)

// fetcher uses http_request (family httpclient) and declares it needs
// tools.http plus a key no kiln family provides.
const fetcher = `
name = "fetcher"
requires_capabilities = ["tools.http", "data.json"]

[[nodes]]
id = "fetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"

[[nodes]]
id = "parse"
type = "parse_json"
input_from = "fetch.body"

[[edges]]
from = "fetch"
to = "parse"

[policy.http]
urls = ["https://api.example.com/**"]
`

func loadTOML(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "workflow.toml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func planWith(t *testing.T, src string, opts gen.PlanOptions) (*gen.Plan, error) {
	t.Helper()
	wf, err := gen.Load(loadTOML(t, src), gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return gen.NewPlan(wf, opts)
}

func TestDecodeProfileStrict(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":    "allow = [\"data\"]\nfamilies = []\n",
		"both":           "allow = [\"data\"]\ndeny = [\"fs\"]\n",
		"neither":        "name = \"x\"\n",
		"unknown family": "allow = [\"data\", \"teleport\"]\n",
		"deny control":   "deny = [\"control\"]\n",
		"syntax":         "allow = [\"data\"\n",
		"not a list":     "allow = \"data\"\n",
	} {
		if _, err := gen.DecodeProfile("p.toml", []byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "p.toml") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
	if _, err := gen.DecodeProfile("p.toml", []byte("name = \"x\"\n# note\nallow = [\"data\"]\nfamilies = []\n")); err == nil ||
		!strings.HasPrefix(err.Error(), `p.toml:4: unknown key "families"`) {
		t.Errorf("unknown key not located: %v", err)
	}
	p, err := gen.LoadProfile(filepath.Join(repoRoot(t), "testdata", "profiles", "airgapped.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"control": true, "fs": true, "http": true, "httpclient": false, "llm": false, "mcp": false} {
		if p.Allows(id) != want {
			t.Errorf("airgapped allows %s = %v", id, !want)
		}
	}
	p, err = gen.LoadProfile(filepath.Join(repoRoot(t), "testdata", "profiles", "pure.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Allows("control") || !p.Allows("data") || p.Allows("fs") {
		t.Errorf("pure profile: %+v", p)
	}
}

func TestProfileRefusesForbiddenFamily(t *testing.T) {
	prof, err := gen.LoadProfile(filepath.Join(repoRoot(t), "testdata", "profiles", "airgapped.toml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = planWith(t, fetcher, gen.PlanOptions{Profile: prof})
	var ce *gen.CapabilityError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CapabilityError, got %v", err)
	}
	if ce.Code != "unsupported_capability" || ce.RequiredCapability != "tools.http" || !slices.Equal(ce.Families, []string{"httpclient"}) {
		t.Fatalf("%+v", ce)
	}
	if !strings.Contains(ce.Error(), "node fetch (http_request)") || !strings.Contains(ce.Error(), "airgapped") {
		t.Errorf("message does not say what needs the family: %v", ce)
	}
	env := ce.Envelope()["error"].(map[string]any)
	if env["code"] != "unsupported_capability" || env["details"].(map[string]any)["requiredCapability"] != "tools.http" {
		t.Errorf("envelope %v", env)
	}
	// Without a profile the same workflow plans fine, httpclient linked.
	p, err := planWith(t, fetcher, gen.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Families, "httpclient") || len(p.Degraded) != 0 || len(p.Unprovided) != 0 {
		t.Errorf("unprofiled plan: families %v degraded %v unprovided %v", p.Families, p.Degraded, p.Unprovided)
	}
}

func TestDegradedPlan(t *testing.T) {
	prof, err := gen.LoadProfile(filepath.Join(repoRoot(t), "testdata", "profiles", "airgapped.toml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planWith(t, fetcher, gen.PlanOptions{Profile: prof, Degrade: true})
	if err != nil {
		t.Fatal(err)
	}
	// The workflow has a [policy] and an http_request node, so it confines
	// itself (sandbox, see confine.Wanted) whether or not httpclient is
	// degraded away.
	if want := []string{"control", "data", "sandbox"}; !reflect.DeepEqual(p.Families, want) {
		t.Errorf("families %v, want %v", p.Families, want)
	}
	for _, f := range p.Manifest.Families {
		if f.ID == "httpclient" {
			t.Errorf("the manifest lists the forbidden family: %v", p.Manifest.FamilyIDs())
		}
	}
	if want := []string{"tools.http"}; !reflect.DeepEqual(p.Degraded, want) || !reflect.DeepEqual(p.Manifest.Degraded, want) {
		t.Errorf("degraded %v / manifest %v, want %v", p.Degraded, p.Manifest.Degraded, want)
	}
	if want := []string{"http_request"}; !reflect.DeepEqual(p.Unprovided, want) {
		t.Errorf("unprovided %v, want %v", p.Unprovided, want)
	}
	// The family's needs are gone with it: no outbound network.
	for _, n := range p.Needs.Needs {
		if n.Kind == "network" || n.ID == "capability:network" {
			t.Errorf("degraded plan still needs %s", n.ID)
		}
	}
	out, err := gen.Emit(p, gen.EmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := string(out.Files[gen.FileNeeds])
	if !strings.Contains(src, `sealed.RegisterNeeds([]byte(kilnNeeds), "http_request")`) {
		t.Errorf("needs_gen.go does not register the unprovided kind:\n%s", src)
	}
	if strings.Contains(string(out.Files[gen.FileCapabilities]), "capabilities/httpclient") {
		t.Error("capabilities_gen.go imports the forbidden family")
	}
}

// TestRequiredKeysLinkTheirFamily: a key the workflow requires links the
// family providing it; a key no family provides is listed as degraded.
func TestRequiredKeysLinkTheirFamily(t *testing.T) {
	p, err := planWith(t, `
name = "needs-mcp"
requires_capabilities = ["mcp.tools", "host.workspace"]
[[nodes]]
id = "end"
type = "terminate"
`, gen.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Families, "mcp") {
		t.Errorf("families %v lack mcp", p.Families)
	}
	if !reflect.DeepEqual(p.Degraded, []string{"host.workspace"}) {
		t.Errorf("degraded %v", p.Degraded)
	}
}

// TestPlanNeedsAreEmbeddedAndDigested: the manifest's digest is the
// SHA-256 of exactly the canonical JSON the binary embeds, and each user
// catalog is an input of kind needs.
func TestPlanNeedsAreEmbeddedAndDigested(t *testing.T) {
	wfPath := loadTOML(t, fetcher)
	catPath := filepath.Join(filepath.Dir(wfPath), "needs", "team.toml")
	if err := os.MkdirAll(filepath.Dir(catPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(catPath, []byte(`
[[agent_needs]]
class_name = "workflow:fetcher"
[agent_needs.needs]
secrets = [{ key = "FETCH_TOKEN", label = "API token" }]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := needs.Load(catPath)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := gen.Load(wfPath, gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := gen.NewPlan(wf, gen.PlanOptions{Catalogs: []*needs.Catalog{cat}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p.NeedsJSON)
	if hex.EncodeToString(sum[:]) != p.Manifest.EffectiveNeedsSHA256 {
		t.Fatal("manifest digest is not the digest of the embedded needs")
	}
	if !strings.Contains(string(p.NeedsJSON), `"secret:FETCH_TOKEN"`) || !strings.Contains(string(p.NeedsJSON), `"network:api.example.com"`) {
		t.Errorf("needs %s", p.NeedsJSON)
	}
	found := false
	for _, in := range p.Manifest.Inputs {
		if in.Kind == "needs" && in.Path == "needs/team.toml" && in.SHA256 == cat.SHA256 {
			found = true
		}
	}
	if !found {
		t.Errorf("catalog not among the manifest inputs: %+v", p.Manifest.Inputs)
	}

	// A conflicting catalog fails the plan closed.
	bad, err := needs.Decode("bad.toml", []byte(`
[[agent_needs]]
class_name = "workflow:fetcher"
[agent_needs.needs]
filesystem = { allow = [{ path = "/srv/x", mode = "ro" }] }
[[dependency_needs]]
class_name = "node:parse_json"
[dependency_needs.needs]
filesystem = { allow = [{ path = "/srv/x", mode = "rw" }] }
`))
	if err != nil {
		t.Fatal(err)
	}
	var ce *needs.ConflictError
	if _, err := gen.NewPlan(wf, gen.PlanOptions{Catalogs: []*needs.Catalog{bad}}); !errors.As(err, &ce) {
		t.Fatalf("want a conflict, got %v", err)
	}
}

// A workflow may require a capability by its OpenWOP identifier, as a
// client reads it from /.well-known/openwop: the family providing it is
// linked, and a profile that forbids that family refuses the build naming
// the key as written.
func TestProfileOpenWOPKeys(t *testing.T) {
	src := strings.Replace(fetcher, `["tools.http", "data.json"]`, `["x-host-kiln-tools-http"]`, 1)
	p, err := planWith(t, src, gen.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Families, "httpclient") || len(p.Degraded) != 0 {
		t.Fatalf("families %v degraded %v", p.Families, p.Degraded)
	}
	prof, err := gen.LoadProfile(filepath.Join(repoRoot(t), "testdata", "profiles", "airgapped.toml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = planWith(t, src, gen.PlanOptions{Profile: prof})
	var ce *gen.CapabilityError
	if !errors.As(err, &ce) || ce.Code != "unsupported_capability" || ce.RequiredCapability != "x-host-kiln-tools-http" {
		t.Fatalf("want unsupported_capability naming x-host-kiln-tools-http, got %#v", err)
	}
}
