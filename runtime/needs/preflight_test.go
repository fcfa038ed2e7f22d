package needs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() *Effective {
	return &Effective{Workflow: "w", Needs: []Need{
		{ID: "secret:API_KEY", Kind: KindSecret, Key: "API_KEY", Sources: []string{"intelligence:openai"}},
		{ID: "secret:OPTIONAL_KEY", Kind: KindSecret, Key: "OPTIONAL_KEY", Optional: true, Sources: []string{"workflow:w"}},
		{ID: "network:api.openai.com", Kind: KindNetwork, Host: "api.openai.com", Sources: []string{"intelligence:openai"}},
		{ID: "filesystem:/srv/out:rw", Kind: KindFilesystem, Path: "/srv/out", Mode: "rw", Sources: []string{"workflow:w"}},
		{ID: "capability:network", Kind: KindCapability, Type: "network", Sources: []string{"family:httpclient"}},
		{ID: "oauth:google:gmail.readonly", Kind: KindOAuth, Provider: "google", Scopes: []string{"gmail.readonly"}, Sources: []string{"workflow:w"}},
	}}
}

func status(r *Report, id string) (string, *Action) {
	for _, it := range r.Needs {
		if it.ID == id {
			return it.Status, it.Action
		}
	}
	return "absent", nil
}

func TestPreflightBlockedWithoutAnything(t *testing.T) {
	r := Evaluate(sample(), Env{HasSecret: func(string) bool { return false }})
	if r.Status != Blocked {
		t.Fatalf("status %s", r.Status)
	}
	for id, want := range map[string]string{
		"secret:API_KEY":              Missing,
		"network:api.openai.com":      ApprovalRequired,
		"filesystem:/srv/out:rw":      ApprovalRequired,
		"capability:network":          ApprovalRequired,
		"oauth:google:gmail.readonly": Missing,
	} {
		if got, _ := status(r, id); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if _, a := status(r, "secret:API_KEY"); a == nil || a.Type != "provide_secret" || a.SecretKey != "API_KEY" {
		t.Errorf("secret action %+v", a)
	}
	if _, a := status(r, "network:api.openai.com"); a == nil || a.Type != "approve_network_access" || a.Host != "api.openai.com" {
		t.Errorf("network action %+v", a)
	}
	if _, a := status(r, "filesystem:/srv/out:rw"); a == nil || a.Type != "approve_filesystem_access" || a.Path != "/srv/out" || a.Mode != "rw" {
		t.Errorf("fs action %+v", a)
	}
	if _, a := status(r, "oauth:google:gmail.readonly"); a == nil || a.Type != "connect_oauth" {
		t.Errorf("oauth action %+v", a)
	}
}

func TestPreflightReadyAndDegraded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "approvals.toml")
	os.WriteFile(path, []byte(`
network = ["*.openai.com"]
capabilities = ["network"]
[[filesystem]]
path = "/srv"
mode = "rw"
[[oauth]]
provider = "google"
scopes = ["gmail.readonly", "calendar"]
`), 0o600)
	a, err := LoadApprovals(path)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{"API_KEY": true}
	r := Evaluate(sample(), Env{HasSecret: func(k string) bool { return have[k] }, Approvals: a})
	if r.Status != Degraded { // only the optional secret is missing
		t.Fatalf("status %s: %+v", r.Status, r.Needs)
	}
	have["OPTIONAL_KEY"] = true
	if r := Evaluate(sample(), Env{HasSecret: func(k string) bool { return have[k] }, Approvals: a}); r.Status != Ready {
		t.Fatalf("status %s", r.Status)
	}
	// A secret value never appears in the report.
	out, _ := json.Marshal(r)
	if strings.Contains(string(out), "sk-") {
		t.Fatal("secret leaked")
	}
}

func TestPreflightReauthAndUnsupported(t *testing.T) {
	a := &Approvals{OAuth: []OAuthGrant{{Provider: "google", Scopes: []string{"calendar"}}}, Capabilities: []string{"network"}}
	r := Evaluate(sample(), Env{HasSecret: func(string) bool { return true }, Approvals: a,
		Capabilities: func(typ string) bool { return typ != "network" }})
	if s, act := status(r, "oauth:google:gmail.readonly"); s != ReauthRequired || act.Type != "reauthorize_oauth" {
		t.Errorf("oauth %s %+v", s, act)
	}
	if s, _ := status(r, "capability:network"); s != Unsupported {
		t.Errorf("capability %s", s)
	}
}

func TestApprovalNeverWidensPolicy(t *testing.T) {
	e := &Effective{Needs: []Need{{ID: "network:evil.net", Kind: KindNetwork, Host: "evil.net", BeyondPolicy: "host evil.net is not in policy.http.urls"}}}
	r := Evaluate(e, Env{Approvals: &Approvals{Network: []string{"evil.net"}}})
	if r.Status != Blocked || r.Needs[0].Status != ApprovalRequired || !strings.Contains(r.Needs[0].Detail, "policy") {
		t.Fatalf("%+v", r)
	}
}

func TestFilesystemApprovalModes(t *testing.T) {
	ro := []FilesystemApproval{{Path: "/data", Mode: "ro"}}
	if pathApproved(ro, "/data/x", "rw") {
		t.Error("ro approval must not cover rw")
	}
	if !pathApproved(ro, "/data/x", "ro") || pathApproved(ro, "/database", "ro") {
		t.Error("prefix matching wrong")
	}
}

func TestLoadApprovalsStrict(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"unknown": "networks = []\n",
		"mode":    "[[filesystem]]\npath = \"/a\"\nmode = \"x\"\n",
	} {
		p := filepath.Join(dir, name+".toml")
		os.WriteFile(p, []byte(src), 0o600)
		if _, err := LoadApprovals(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCanonicalDigestStable(t *testing.T) {
	a, b := sample(), sample()
	b.Needs[0], b.Needs[1] = b.Needs[1], b.Needs[0]
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db || len(da) != 64 {
		t.Fatalf("%s %s", da, db)
	}
}
