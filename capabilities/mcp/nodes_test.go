package mcp_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/kilnworks/kiln/capabilities/control"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
)

// nodesWorkflow has one call_mcp_tool (start "tool", tool from the
// argument) with an error branch, and one read_mcp_resource (start
// "read"), on server "docs" started by command.
func nodesWorkflow(command, tool, extra string) string {
	return fmt.Sprintf(`
name = "mcp-nodes"

[[start_nodes]]
name = "tool"
source = "manual"
entry_node = "call"

[[start_nodes]]
name = "read"
source = "manual"
entry_node = "page"

[[mcp_servers]]
name = "docs"
command = %s
allow_tools = ["echo", "structured", "fail", "env", "crash", "nope"]
allow_resources = ["test://docs/*"]

[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = %q
args_from = "trigger.args"

[[nodes]]
id = "tool_failed"
type = "merge"

[[nodes]]
id = "page"
type = "read_mcp_resource"
resource_from = "trigger.uri"

[[edges]]
from = "call"
to = "tool_failed"
when = "error"
%s`, command, tool, extra)
}

func mustValid(t *testing.T, src string) {
	t.Helper()
	wf, err := gen.Decode("workflow.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Validate(wf); err != nil {
		t.Fatalf("kiln's validator rejects the test workflow: %v", err)
	}
}

func TestStdioToolCallAndResourceRead(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	src := nodesWorkflow(stdioCommand(t, rec), "echo", "")
	mustValid(t, src)
	h := mustHost(t, src, "")

	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "hi"}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	out := output(t, rep, "call")
	if out["tool"] != "echo" || out["server"] != "docs" || out["is_error"] != false || out["structured"] != nil {
		t.Fatalf("call output %s", jsonText(out))
	}
	if got := jsonText(out["content"]); got != `[{"text":"echo: hi","type":"text"}]` {
		t.Fatalf("content %s", got)
	}

	rep = h.run(t, "read", map[string]any{"uri": "test://docs/a"})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	page := output(t, rep, "page")
	want := `{"contents":[{"mimeType":"text/plain","text":"content of test://docs/a","uri":"test://docs/a"}],"server":"docs","uri":"test://docs/a"}`
	if got := jsonText(page); got != want {
		t.Fatalf("read output\n got %s\nwant %s", got, want)
	}

	// Both runs used one server process: servers are reused across runs.
	recs := readRecords(t, rec)
	if starts := recordsOf(recs, "start"); len(starts) != 1 {
		t.Fatalf("server started %d times, want once: %v", len(starts), recs)
	}
	calls := recordsOf(recs, "call")
	if len(calls) != 1 || calls[0].Tool != "echo" || string(calls[0].Args) != `{"message":"hi"}` {
		t.Fatalf("recorded calls %+v", calls)
	}
}

func TestStructuredContentAndIsErrorBranch(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "structured", ""), "")
	rep := h.run(t, "tool", nil)
	out := output(t, rep, "call")
	if got := jsonText(out["structured"]); got != `{"ok":true,"temperature":21.5}` {
		t.Fatalf("structured %s", got)
	}

	h = mustHost(t, nodesWorkflow(stdioCommand(t, rec), "fail", ""), "")
	rep = h.run(t, "tool", nil)
	if rep.Outcome.Status != runtime.StatusCompleted || rep.Outcome.LastNode != "tool_failed" {
		t.Fatalf("is_error must take the error branch: %+v path %v", rep.Outcome, rep.Trace.Path())
	}
	out = output(t, rep, "call")
	if out["is_error"] != true || !strings.Contains(jsonText(out["content"]), "failed on purpose") {
		t.Fatalf("output %s", jsonText(out))
	}
	if b := rep.Trace.Entries[0].Branch; b != "error" {
		t.Fatalf("branch %v, want error", b)
	}
}

func TestArgsAreAlwaysAnObject(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")

	// Missing and null args_from both send {}, never null.
	for _, payload := range []map[string]any{nil, {"args": nil}} {
		if rep := h.run(t, "tool", payload); rep.Outcome.Status != runtime.StatusCompleted {
			t.Fatalf("payload %v: %+v", payload, rep.Outcome)
		}
	}
	for i, c := range recordsOf(readRecords(t, rec), "call") {
		if string(c.Args) != "{}" {
			t.Fatalf("call %d sent arguments %s, want {}", i, c.Args)
		}
	}

	// A non-object is a tool error naming the node, and is never sent.
	before := len(readRecords(t, rec))
	rep := h.run(t, "tool", map[string]any{"args": []any{"not", "an", "object"}})
	if rep.Outcome.Status != runtime.StatusErrored || runtime.ClassOf(rep.Outcome.Err) != runtime.ClassTool {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if r := rep.Outcome.Reason; !strings.Contains(r, "node call (call_mcp_tool)") || !strings.Contains(r, "want an object") {
		t.Fatalf("reason %q", r)
	}
	if after := len(readRecords(t, rec)); after != before {
		t.Fatalf("a rejected call reached the server")
	}
}

func TestJSONRPCErrorIsAnMCPError(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "nope", ""), "")
	rep := h.run(t, "tool", nil)
	if rep.Outcome.Status != runtime.StatusErrored || runtime.ClassOf(rep.Outcome.Err) != runtime.ClassMCP {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	r := rep.Outcome.Reason
	if !strings.Contains(r, "node call (call_mcp_tool)") || !strings.Contains(r, "server docs: tools/call nope") || !strings.Contains(r, "nope") {
		t.Fatalf("reason %q", r)
	}

	// A resource the server does not have is an MCP error too.
	h = mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	rep = h.run(t, "read", map[string]any{"uri": "test://docs/missing"})
	if rep.Outcome.Status != runtime.StatusErrored || runtime.ClassOf(rep.Outcome.Err) != runtime.ClassMCP ||
		!strings.Contains(rep.Outcome.Reason, "node page (read_mcp_resource)") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}

// TestDeniedNeverReachesServer: a tool or resource outside either
// allowlist is a counted, audited policy denial, and the server is not
// even started (the server records every call and start).
func TestDeniedNeverReachesServer(t *testing.T) {
	cases := []struct {
		name, tool, start, extra, target string
		payload                          map[string]any
	}{
		{name: "tool not in allow_tools", tool: "get_secrets", start: "tool", target: "docs/get_secrets"},
		{name: "tool not in policy", tool: "env", start: "tool", target: "env",
			extra: "[policy.mcp]\ntools = [\"echo\"]\nresources = [\"test://docs/*\"]\n"},
		{name: "policy without mcp section", tool: "echo", start: "tool", target: "echo",
			extra: "[policy.env]\nread_keys = []\n"},
		{name: "server in policy but not this one", tool: "echo", start: "tool", target: "docs/echo",
			extra: "[policy.mcp]\nservers = [\"other\"]\ntools = [\"*\"]\nresources = [\"*\"]\n"},
		{name: "resource not in allow_resources", tool: "echo", start: "read", target: "docs test://private/key",
			payload: map[string]any{"uri": "test://private/key"}},
		{name: "resource not in policy", tool: "echo", start: "read", target: "test://docs/b",
			payload: map[string]any{"uri": "test://docs/b"},
			extra:   "[policy.mcp]\ntools = [\"echo\"]\nresources = [\"test://docs/a\"]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "calls.jsonl")
			h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), tc.tool, tc.extra), "")
			rep := h.run(t, tc.start, tc.payload)
			if rep.Outcome.Status != runtime.StatusErrored || runtime.ClassOf(rep.Outcome.Err) != runtime.ClassPolicy {
				t.Fatalf("outcome %+v", rep.Outcome)
			}
			if !strings.Contains(rep.Outcome.Reason, "denied on "+tc.target) {
				t.Fatalf("reason %q does not name target %q", rep.Outcome.Reason, tc.target)
			}
			if n := rep.Counters.PolicyDenials.Load(); n != 1 {
				t.Fatalf("policy_denials = %d", n)
			}
			if !strings.Contains(h.audit.String(), "policy.denied") {
				t.Fatalf("denial not audited:\n%s", h.audit.String())
			}
			if recs := readRecords(t, rec); len(recs) != 0 {
				t.Fatalf("the server saw %+v; a denied request must not even start it", recs)
			}
			if pid := h.pool(t).PID("docs"); pid != 0 {
				t.Fatalf("server process %d was started", pid)
			}
		})
	}
}

func TestDryRunPlaceholders(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	h := mustHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""), "")
	h.DryRun = true
	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "x"}})
	if got := jsonText(output(t, rep, "call")); got != `{"args":{"message":"x"},"dry_run":true,"server":"docs","tool":"echo"}` {
		t.Fatalf("dry-run tool output %s", got)
	}
	rep = h.run(t, "read", map[string]any{"uri": "test://docs/a"})
	if got := jsonText(output(t, rep, "page")); got != `{"dry_run":true,"server":"docs","uri":"test://docs/a"}` {
		t.Fatalf("dry-run read output %s", got)
	}
	// Policy is still checked first in a dry run.
	rep = h.run(t, "read", map[string]any{"uri": "test://private/key"})
	if runtime.ClassOf(rep.Outcome.Err) != runtime.ClassPolicy {
		t.Fatalf("dry run skipped the allowlist: %+v", rep.Outcome)
	}
	if recs := readRecords(t, rec); len(recs) != 0 {
		t.Fatalf("dry run reached the server: %+v", recs)
	}
}

// TestEnvIsolation: the server process sees PATH and the declared env
// vars (resolved from secrets) and nothing else of kiln's environment.
func TestEnvIsolation(t *testing.T) {
	t.Setenv("KILN_LEAK_CANARY", "must-not-leak")
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	src := strings.Replace(nodesWorkflow(stdioCommand(t, rec), "env", ""),
		`allow_resources = ["test://docs/*"]`,
		"allow_resources = [\"test://docs/*\"]\nenv = { API_TOKEN = \"DOCS_TOKEN\", MODE = \"DOCS_MODE\" }", 1)
	secrets := map[string]string{"DOCS_TOKEN": "tok-8c1f0e5d-secret", "DOCS_MODE": "strict"}
	var asked []string
	h := mustHost(t, src, "", func(h *runtime.Host) {
		h.Engine.Services.Secret = func(name string) (string, error) {
			asked = append(asked, name)
			v, ok := secrets[name]
			if !ok {
				return "", fmt.Errorf("unknown secret")
			}
			return v, nil
		}
	})
	rep := h.run(t, "tool", nil)
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	content := output(t, rep, "call")["content"].([]any)
	env := strings.Split(content[0].(map[string]any)["text"].(string), "\n")
	want := []string{"API_TOKEN=tok-8c1f0e5d-secret", "MODE=strict", "PATH=" + os.Getenv("PATH")}
	if strings.Join(env, "|") != strings.Join(want, "|") {
		t.Fatalf("server environment\n got %q\nwant %q", env, want)
	}
	if len(asked) != 2 {
		t.Fatalf("secrets resolved %v", asked)
	}
	// The resolved value is registered for redaction.
	if got := runtime.Redact("token tok-8c1f0e5d-secret"); got != "token "+runtime.RedactedMarker {
		t.Fatalf("secret not registered for redaction: %q", got)
	}
	if strings.Contains(h.audit.String(), "tok-8c1f0e5d-secret") {
		t.Fatalf("secret in the audit log")
	}
}

func TestMissingSecretFailsTheStart(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	src := strings.Replace(nodesWorkflow(stdioCommand(t, rec), "echo", ""),
		`allow_resources = ["test://docs/*"]`,
		"allow_resources = [\"test://docs/*\"]\nenv = { API_TOKEN = \"KILN_TEST_UNSET_SECRET_93\" }", 1)
	h := mustHost(t, src, "")
	rep := h.run(t, "tool", nil)
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "env API_TOKEN: secret KILN_TEST_UNSET_SECRET_93") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if recs := readRecords(t, rec); len(recs) != 0 {
		t.Fatalf("server started without its secret: %+v", recs)
	}
}

// TestLegacyStdioFlag: --mcp-stdio is server "default", bounded by
// [policy.mcp] alone; the informational `servers` list of a reference
// workflow does not block it.
func TestLegacyStdioFlag(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	exe, _ := os.Executable()
	src := `
name = "legacy"

[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
args_from = "trigger.args"

[policy.mcp]
servers = ["docs"]
tools = ["echo"]
resources = []
`
	mustValid(t, src)
	h := mustHost(t, src, fmt.Sprintf("%q %s '%s'", exe, serverArg, rec))
	rep := h.run(t, "", map[string]any{"args": map[string]any{"message": "legacy"}})
	if rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if out := output(t, rep, "call"); out["server"] != "default" || !strings.Contains(jsonText(out["content"]), "echo: legacy") {
		t.Fatalf("output %s", jsonText(out))
	}

	denied := mustHost(t, strings.Replace(src, `tool = "echo"`, `tool = "env"`, 1), fmt.Sprintf("%q %s %q", exe, serverArg, rec))
	rep = denied.run(t, "", nil)
	if runtime.ClassOf(rep.Outcome.Err) != runtime.ClassPolicy {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
	if calls := recordsOf(readRecords(t, rec), "call"); len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
}

func TestNoServerConfigured(t *testing.T) {
	src := `
name = "unconfigured"

[[nodes]]
id = "call"
type = "call_mcp_tool"
tool = "echo"
`
	h := mustHost(t, src, "")
	if mcpclient.ClientFrom(h.Engine.Services) != nil {
		t.Fatalf("a pool without servers was set up")
	}
	rep := h.run(t, "", nil)
	if rep.Outcome.Status != runtime.StatusErrored || !strings.Contains(rep.Outcome.Reason, "--mcp-stdio") {
		t.Fatalf("outcome %+v", rep.Outcome)
	}
}

// TestMockClientIsKept: Setup leaves a client someone else installed
// (the fixture runner's mock) in place, and the nodes use it.
func TestMockClientIsKept(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	m := &mockClient{}
	h, err := newHost(t, nodesWorkflow(stdioCommand(t, rec), "echo", ""))
	if err != nil {
		t.Fatal(err)
	}
	mcpclient.SetClient(h.Engine.Services, m)
	if err := kmcpSetup(h); err != nil {
		t.Fatal(err)
	}
	if mcpclient.ClientFrom(h.Engine.Services) != m {
		t.Fatalf("Setup replaced the mock")
	}
	rep := h.run(t, "tool", map[string]any{"args": map[string]any{"message": "m"}})
	if rep.Outcome.Status != runtime.StatusCompleted || m.calls != "docs/echo {\"message\":\"m\"}" {
		t.Fatalf("outcome %+v, mock saw %q", rep.Outcome, m.calls)
	}
	if out := output(t, rep, "call"); jsonText(out["content"]) != "[]" {
		t.Fatalf("content must default to [], got %s", jsonText(out["content"]))
	}
}

type mockClient struct{ calls string }

func (m *mockClient) CallTool(ctx context.Context, server, tool string, args map[string]any) (map[string]any, error) {
	m.calls = server + "/" + tool + " " + jsonText(args)
	return map[string]any{}, nil
}

func (m *mockClient) ReadResource(ctx context.Context, server, uri string) (map[string]any, error) {
	return map[string]any{"contents": []any{}}, nil
}
