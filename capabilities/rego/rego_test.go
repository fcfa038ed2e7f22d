package rego_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	_ "github.com/kilnworks/kiln/capabilities/env"
	_ "github.com/kilnworks/kiln/capabilities/fs"
	_ "github.com/kilnworks/kiln/capabilities/httpclient"
	_ "github.com/kilnworks/kiln/capabilities/llm"
	"github.com/kilnworks/kiln/capabilities/llm/intel"
	_ "github.com/kilnworks/kiln/capabilities/mcp"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	_ "github.com/kilnworks/kiln/capabilities/rego"
	_ "github.com/kilnworks/kiln/capabilities/shell"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// ReferencePolicy is the reference's example policy, with the safe prefix
// taken from data so a test can point it at a t.TempDir().
const ReferencePolicy = `package agent

default allow := false

allow if {
	input.tool == "fs.read"
	startswith(input.args.path, data.safe_prefix)
}

allow if {
	input.tool == "http.request"
	input.args.method == "POST"
}
`

// tempDir is a t.TempDir() with symlinks resolved, as the policy sees it.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result is one run with its audit log.
type result struct {
	*runtime.Report
	audit string
}

// run compiles wf (as kiln run and a sealed binary do) and runs it once
// with payload, intelligence and MCP answered by stubs.
func run(t *testing.T, wf *workflow.Workflow, payload map[string]any) result {
	t.Helper()
	p, err := runtime.Compile(wf, runtime.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	e := &runtime.Engine{Audit: slog.New(slog.NewJSONHandler(&audit, nil)), Services: &runtime.Services{}}
	intel.SetClient(e.Services, func(string) (intel.Client, error) { return stubIntel{}, nil })
	mcpclient.SetClient(e.Services, stubMCP{})
	rep := e.Run(context.Background(), p, runtime.RunOptions{Trigger: payload})
	return result{rep, audit.String()}
}

type stubIntel struct{}

func (stubIntel) Complete(context.Context, *intel.Request) (*intel.Response, error) {
	return &intel.Response{Content: "ok", Usage: intel.Usage{PromptTokens: 1, CompletionTokens: 1}}, nil
}

type stubMCP struct{}

func (stubMCP) CallTool(context.Context, string, string, map[string]any) (map[string]any, error) {
	return map[string]any{"content": []any{}}, nil
}

func (stubMCP) ReadResource(context.Context, string, string) (map[string]any, error) {
	return map[string]any{"contents": []any{}}, nil
}

// node is a one-node workflow body; every node may be retried on any
// error, so a test sees a denial that is (wrongly) retried.
func node(n workflow.Node) []workflow.Node {
	zero := 0
	n.Retry = &workflow.Retry{MaxAttempts: 3, BackoffMS: &zero}
	return []workflow.Node{n}
}

// TestReferencePolicy: the reference's example policy. An fs.read under
// the safe prefix is allowed; elsewhere it is denied although the static
// allowlist allows it. An http.request POST to an allowed prefix is
// allowed, a GET to the same URL denied.
func TestReferencePolicy(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/data/safe/report.txt", "safe")
	writeFile(t, dir+"/data/other/secret.txt", "secret")
	var posts int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts++
		}
		io.WriteString(w, "{}")
	}))
	defer srv.Close()

	pol := &workflow.Policy{
		FS:   &workflow.FSPolicy{Read: []string{dir + "/data/**"}},
		HTTP: &workflow.HTTPPolicy{URLs: []string{srv.URL + "/api/**"}},
		Rego: &workflow.RegoPolicy{Inline: ReferencePolicy, Data: map[string]string{"safe_prefix": dir + "/data/safe/"}},
	}
	read := func(path string) result {
		return run(t, &workflow.Workflow{Name: "ref", Policy: pol,
			Nodes: node(workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})}, map[string]any{"path": path})
	}
	if r := read(dir + "/data/safe/report.txt"); r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("fs.read under the safe prefix: %s %s", r.Outcome.Status, r.Outcome.Reason)
	}
	r := read(dir + "/data/other/secret.txt")
	assertRegoDenial(t, r, "load", "fs.read", dir+"/data/other/secret.txt")
	// Without [policy.rego] the static allowlist alone allows it.
	static := *pol
	static.Rego = nil
	if r := run(t, &workflow.Workflow{Name: "ref", Policy: &static,
		Nodes: node(workflow.Node{ID: "load", Type: "read_file", PathFrom: "trigger.path"})},
		map[string]any{"path": dir + "/data/other/secret.txt"}); r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("static allowlist alone: %s %s", r.Outcome.Status, r.Outcome.Reason)
	}

	request := func(method string) result {
		return run(t, &workflow.Workflow{Name: "ref", Policy: pol,
			Nodes: node(workflow.Node{ID: "call", Type: "http_request", Method: method, URLFrom: "trigger.url"})},
			map[string]any{"url": srv.URL + "/api/items"})
	}
	if r := request("POST"); r.Outcome.Status != runtime.StatusCompleted || posts != 1 {
		t.Fatalf("POST to the allowed prefix: %s %s (%d posts)", r.Outcome.Status, r.Outcome.Reason, posts)
	}
	assertRegoDenial(t, request("GET"), "call", "http.request", "GET "+srv.URL+"/api/items")
}

// assertRegoDenial checks a denial by [policy.rego]: the run errored with
// a policy error naming the target, counted once, audited with source
// rego, and not retried.
func assertRegoDenial(t *testing.T, r result, nodeID, tool, target string) {
	t.Helper()
	if r.Outcome.Status != runtime.StatusErrored || r.Outcome.Err == nil || r.Outcome.Err.Class != runtime.ClassPolicy {
		t.Fatalf("%s on %s: want a policy error, got %s %+v", tool, target, r.Outcome.Status, r.Outcome.Err)
	}
	if want := tool + " denied on " + target + ": [policy.rego] data.agent.allow"; !strings.Contains(r.Outcome.Reason, want) {
		t.Fatalf("reason %q does not contain %q", r.Outcome.Reason, want)
	}
	if n := r.Counters.PolicyDenials.Load(); n != 1 {
		t.Fatalf("policy_denials = %d, want 1", n)
	}
	var denied []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.audit), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "policy.denied" {
			denied = append(denied, m)
		}
	}
	if len(denied) != 1 || denied[0]["source"] != "rego" || denied[0]["node"] != nodeID || denied[0]["target"] != target {
		t.Fatalf("policy.denied events: %v\n%s", denied, r.audit)
	}
	if n := r.Counters.NodeExecutions.Load(); n != 1 {
		t.Fatalf("the denied node ran %d times under retry = {max_attempts = 3}, want once", n)
	}
}

// exactInput allows exactly one input document: the policy compares the
// whole input with want, so an allowed run proves what Rego saw.
func exactInput(t *testing.T, want map[string]any) string {
	t.Helper()
	doc, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("package agent\n\ndefault allow := false\n\nallow if input == %s\n", doc)
}

// TestEveryToolReachesRego runs each node kind that touches the outside
// world through its real handler under a policy that allows exactly the
// documented input document, then under one that expects a different
// argument, which must deny.
func TestEveryToolReachesRego(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/in.txt", "x")
	t.Setenv("KILN_REGO_TEST", "v")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	defer srv.Close()
	echo, err := policy.ResolvePath("/bin/echo")
	if err != nil {
		t.Skip("no /bin/echo")
	}
	static := func() *workflow.Policy {
		return &workflow.Policy{
			FS:    &workflow.FSPolicy{Read: []string{dir + "/**"}, Write: []string{dir + "/**"}},
			Env:   &workflow.EnvPolicy{ReadKeys: []string{"KILN_REGO_TEST"}},
			HTTP:  &workflow.HTTPPolicy{URLs: []string{srv.URL + "/**"}},
			Shell: &workflow.ShellPolicy{Commands: []string{"/bin/*", "/usr/bin/*"}},
			MCP:   &workflow.MCPPolicy{Servers: []string{"docs"}, Tools: []string{"search"}, Resources: []string{"docs://pages/*"}},
		}
	}
	mcpServers := []workflow.MCPServer{{Name: "docs", Command: []string{"/bin/false"},
		AllowTools: []string{"search"}, AllowResources: []string{"docs://pages/*"}}}
	backends := &workflow.Intelligence{Backends: []workflow.Backend{{Name: "fast", Provider: "openai", Model: "gpt-test", APIKeyEnv: "KILN_REGO_TEST"}}}

	cases := []struct {
		tool    string
		n       workflow.Node
		payload map[string]any
		args    map[string]any
		wrong   map[string]any // one argument changed: the policy must deny
	}{
		{"fs.read", workflow.Node{Type: "read_file", PathFrom: "trigger.path"}, map[string]any{"path": dir + "/in.txt"},
			map[string]any{"path": dir + "/in.txt"}, map[string]any{"path": dir + "/other.txt"}},
		{"fs.write", workflow.Node{Type: "write_file", PathFrom: "trigger.path", ContentFrom: "trigger.path"}, map[string]any{"path": dir + "/out.txt"},
			map[string]any{"path": dir + "/out.txt"}, map[string]any{"path": dir + "/in.txt"}},
		{"fs.write", workflow.Node{Type: "create_dir", PathFrom: "trigger.path"}, map[string]any{"path": dir + "/sub"},
			map[string]any{"path": dir + "/sub"}, map[string]any{"path": dir + "/in.txt"}},
		{"env.read", workflow.Node{Type: "read_env", Key: "KILN_REGO_TEST"}, nil,
			map[string]any{"key": "KILN_REGO_TEST"}, map[string]any{"key": "HOME"}},
		{"http.request", workflow.Node{Type: "http_request", Method: "PUT", URLFrom: "trigger.url"}, map[string]any{"url": srv.URL + "/x?q=1"},
			map[string]any{"method": "PUT", "url": srv.URL + "/x?q=1"}, map[string]any{"method": "POST", "url": srv.URL + "/x?q=1"}},
		{"shell.run", workflow.Node{Type: "shell_run", Command: "/bin/echo", ArgsFrom: "trigger.args"}, map[string]any{"args": []any{"hello", "world"}},
			map[string]any{"command": echo, "args": []string{"hello", "world"}}, map[string]any{"command": echo, "args": []string{"hello"}}},
		{"mcp.tool", workflow.Node{Type: "call_mcp_tool", Server: "docs", Tool: "search"}, nil,
			map[string]any{"server": "docs", "tool": "search"}, map[string]any{"server": "docs", "tool": "other"}},
		{"mcp.resource", workflow.Node{Type: "read_mcp_resource", Server: "docs", ResourceFrom: "trigger.uri"}, map[string]any{"uri": "docs://pages/a"},
			map[string]any{"server": "docs", "uri": "docs://pages/a"}, map[string]any{"server": "docs", "uri": "docs://pages/b"}},
		{"llm.infer", workflow.Node{Type: "llm_infer", Backend: "fast", Prompt: "hi"}, nil,
			map[string]any{"backend": "fast", "model": "gpt-test"}, map[string]any{"backend": "fast", "model": "gpt-other"}},
	}
	for _, c := range cases {
		t.Run(c.tool+"/"+c.n.Type, func(t *testing.T) {
			c.n.ID = "n"
			wf := func(want map[string]any) *workflow.Workflow {
				pol := static()
				pol.Rego = &workflow.RegoPolicy{Inline: exactInput(t, map[string]any{"tool": c.tool, "args": want})}
				return &workflow.Workflow{Name: "kinds", Policy: pol, Nodes: node(c.n), MCPServers: mcpServers, Intelligence: backends}
			}
			if r := run(t, wf(c.args), c.payload); r.Outcome.Status != runtime.StatusCompleted {
				t.Fatalf("input %v not seen as documented: %s %s", c.args, r.Outcome.Status, r.Outcome.Reason)
			}
			r := run(t, wf(c.wrong), c.payload)
			if r.Outcome.Status != runtime.StatusErrored || r.Outcome.Err.Class != runtime.ClassPolicy ||
				!strings.Contains(r.Outcome.Reason, c.tool+" denied on") || !strings.Contains(r.audit, `"source":"rego"`) {
				t.Fatalf("policy expecting %v: %s %s", c.wrong, r.Outcome.Status, r.Outcome.Reason)
			}
		})
	}
}

// TestDeleteAndListReachRego: no node deletes or lists yet; their checks
// reach the decision with the documented input all the same.
func TestDeleteAndListReachRego(t *testing.T) {
	dir := tempDir(t)
	for _, tool := range []string{"fs.delete", "fs.list"} {
		pol, err := policy.Compile(&workflow.Policy{
			FS:   &workflow.FSPolicy{Read: []string{dir + "/**"}, Delete: []string{dir + "/**"}, List: []string{dir + "/**"}},
			Rego: &workflow.RegoPolicy{Inline: exactInput(t, map[string]any{"tool": tool, "args": map[string]any{"path": dir + "/a"}})},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		check := pol.FSDelete
		if tool == "fs.list" {
			check = pol.FSList
		}
		if _, err := check(dir + "/a"); err != nil {
			t.Errorf("%s of the allowed input: %v", tool, err)
		}
		if _, err := check(dir + "/b"); !policy.IsDenial(err) {
			t.Errorf("%s of another path: %v", tool, err)
		}
	}
}
