package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/capabilities/http/openwoptest"
	"github.com/kilnworks/kiln/runtime/cli"
)

// getJSON fetches base+path, wants status code and a JSON body, and
// returns it decoded.
func getJSON(t *testing.T, base, path string, code int) any {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != code || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s %s, want %d JSON", path, resp.StatusCode, resp.Header.Get("Content-Type"), body, code)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
	return doc
}

func mustValidate(t *testing.T, s *jsonschema.Schema, path string, doc any) {
	t.Helper()
	if err := s.Validate(doc); err != nil {
		b, _ := json.Marshal(doc)
		t.Fatalf("GET %s does not match the published OpenWOP schema: %v\n%s", path, err, b)
	}
}

// checkOpenWOP fetches a sealed binary's OpenWOP documents over loopback,
// validates them against the published schemas, and checks the agent's
// degraded keys (nil: the field must be absent) and that no advertised key
// is listed as degraded. It returns the advertised keys and the agent's
// tool allowlist.
func checkOpenWOP(t *testing.T, base, agentID string, degraded []string) (advertised, tools []string) {
	t.Helper()
	caps := openwoptest.Compile(t, openwoptest.Capabilities)
	inv := openwoptest.Compile(t, openwoptest.AgentInventory)
	entry := openwoptest.Compile(t, openwoptest.AgentInventory+"#/$defs/AgentInventoryEntry")

	d := getJSON(t, base, "/.well-known/openwop", 200)
	mustValidate(t, caps, "/.well-known/openwop", d)
	for _, k := range d.(map[string]any)["runtimeCapabilities"].([]any) {
		advertised = append(advertised, k.(string))
	}

	list := getJSON(t, base, "/v1/agents", 200)
	mustValidate(t, inv, "/v1/agents", list)
	agents := list.(map[string]any)["agents"].([]any)
	if len(agents) != 1 {
		t.Fatalf("GET /v1/agents: %v", list)
	}
	a := agents[0].(map[string]any)
	if a["agentId"] != agentID {
		t.Fatalf("agentId %v, want %s", a["agentId"], agentID)
	}
	raw, present := a["degraded"]
	var got []string
	for _, k := range func() []any { l, _ := raw.([]any); return l }() {
		got = append(got, k.(string))
		if slices.Contains(advertised, k.(string)) {
			t.Errorf("%s is advertised and listed as degraded", k)
		}
	}
	if degraded == nil && present || !reflect.DeepEqual(got, degraded) {
		t.Errorf("agent degraded = %v (present %v), want %v", raw, present, degraded)
	}

	one := getJSON(t, base, "/v1/agents/"+agentID, 200)
	mustValidate(t, entry, "/v1/agents/{agentId}", one)
	if !reflect.DeepEqual(one, a) {
		t.Errorf("GET /v1/agents/%s = %v, want the inventory entry %v", agentID, one, a)
	}
	nf := getJSON(t, base, "/v1/agents/local.kiln.nobody", 404).(map[string]any)
	if e, _ := nf["error"].(map[string]any); e["code"] != "agent_not_found" {
		t.Errorf("unknown agent: %v", nf)
	}
	for _, k := range a["toolAllowlist"].([]any) {
		tools = append(tools, k.(string))
	}
	return advertised, tools
}

// satisfiedHook requires its capabilities by the OpenWOP identifiers a
// client reads from /.well-known/openwop; the build links their families.
const satisfiedHook = `
name = "satisfied-hook"
description = "renders a greeting"
requires_capabilities = ["x-host-kiln-serve-http", "x-host-kiln-data-template", "flow.control"]

[[start_nodes]]
name = "hook"
source = "http"

[[http_routes]]
method = "POST"
path = "/hook"
start_node = "hook"
auth = "none"

[[nodes]]
id = "greet"
type = "template_render"
template = "hello"
`

// TestSealedOpenWOPSatisfied builds a workflow whose requirements are all
// met, serves the sealed binary on loopback and checks its OpenWOP
// documents: valid against the published schemas, every required key
// advertised, degraded absent.
func TestSealedOpenWOPSatisfied(t *testing.T) {
	openwoptest.Dir(t) // skip before the build when the schemas are absent
	bin := filepath.Join(t.TempDir(), "hook")
	if code, _, stderr := runInProcess("build", writeWorkflow(t, t.TempDir(), satisfiedHook), "-o", bin); code != cli.ExitOK {
		t.Fatalf("kiln build: exit %d\n%s", code, stderr)
	}
	base := serveSealed(t, bin)
	adv, tools := checkOpenWOP(t, base, "local.kiln.satisfied-hook", nil)
	if !reflect.DeepEqual(tools, []string{"kilnworks.kiln:template_render"}) {
		t.Errorf("toolAllowlist = %v", tools)
	}
	for _, k := range []string{"x-host-kiln-serve-http", "x-host-kiln-data-template", "x-host-kiln-flow-control"} {
		if !slices.Contains(adv, k) {
			t.Errorf("%s not advertised: %v", k, adv)
		}
	}
	if slices.Contains(adv, "x-host-kiln-tools-http") {
		t.Errorf("a family the build did not link is advertised: %v", adv)
	}
}

// serveSealed starts a sealed binary on a loopback port and returns its
// base URL; cleanup stops it with SIGTERM and waits for it.
func serveSealed(t *testing.T, bin string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "--bind", "127.0.0.1:0", "--log-format", "json", "--drain-timeout-secs", "2")
	cmd.Env = append(os.Environ(), env...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("no exit after SIGTERM")
		}
	})
	addrRE := regexp.MustCompile(`"msg":"http.listening".*?"addr":"([0-9.:]+)"`)
	deadline := time.Now().Add(20 * time.Second)
	for !addrRE.MatchString(logs.String()) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("sealed binary exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no http.listening event:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "http://" + addrRE.FindStringSubmatch(logs.String())[1]
}
