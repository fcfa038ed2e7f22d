package llm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime"
)

// agentWorkflow is an agent over dir with read and write tools; policy
// lets it read dir and write dir/out only.
func agentWorkflow(dir string, extra string) string {
	return `
name = "agent"
[policy]
fs = { read = ["` + dir + `/**"], write = ["` + dir + `/out/**"] }
env = { read_keys = ["SAFE_*"] }
[[nodes]]
id = "agent"
type = "agent_loop"
backend = "default"
max_steps = 4
tools = ["read_file", "write_file", "read_env"]
instructions = "Summarise {{trigger.file}} into ` + dir + `/out/summary.txt"
` + extra
}

func transcript(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	var entries []map[string]any
	for _, e := range out["transcript"].([]any) {
		entries = append(entries, e.(map[string]any))
	}
	return entries
}

func TestAgentUsesToolsThenFinishes(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	os.WriteFile(in, []byte("kiln seals workflows"), 0o644)
	outFile := filepath.Join(dir, "out", "summary.txt")
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "read_file", "args": {"path": "`+in+`"}}`, 50, 10),
		turn("```json\n{\"tool\": \"write_file\", \"args\": {\"path\": \""+outFile+"\", \"content\": \"seals\"}}\n```", 80, 12),
		turn(`{"final": {"summary": "seals", "written": true}}`, 100, 8),
	}})
	p := compile(t, agentWorkflow(dir, ""), nil)
	e, audit := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"file": in})
	wantStatus(t, r, runtime.StatusCompleted)
	out := output(t, r, "agent")
	if out["steps"] != json.Number("3") || out["tokens"] != json.Number("260") {
		t.Fatalf("output = %v", out)
	}
	if res := out["result"].(map[string]any); res["summary"] != "seals" || res["written"] != true {
		t.Fatalf("result = %v", res)
	}
	if data, err := os.ReadFile(outFile); err != nil || string(data) != "seals" {
		t.Fatalf("write_file tool did not write: %q %v", data, err)
	}
	tr := transcript(t, out)
	if len(tr) != 3 || tr[0]["tool"] != "read_file" || tr[2]["final"] == nil {
		t.Fatalf("transcript = %v", tr)
	}
	obs := tr[0]["observation"].(map[string]any)
	if obs["ok"] != true || obs["output"].(map[string]any)["content"] != "kiln seals workflows" {
		t.Fatalf("observation = %v", obs)
	}
	// The model saw the system protocol, the rendered instructions and the
	// observation of its read.
	reqs := srv.Requests()
	first := reqs[0].Messages
	if first[0].Role != "system" || !strings.Contains(first[0].Content, `{"final": <any JSON>}`) ||
		!strings.Contains(first[0].Content, "read_env") || strings.Contains(first[0].Content, "shell_run") {
		t.Fatalf("system prompt = %q", first[0].Content)
	}
	if first[1].Content != "Summarise "+in+" into "+dir+"/out/summary.txt" {
		t.Fatalf("instructions = %q", first[1].Content)
	}
	second := reqs[1].Messages
	if len(second) != 4 || second[2].Role != "assistant" || !strings.Contains(second[3].Content, "kiln seals workflows") {
		t.Fatalf("second request = %+v", second)
	}
	if cost := r.Counters.Snapshot(); cost["llm_calls"] != 3 || cost["llm_tokens"] != 260 || cost["policy_denials"] != 0 {
		t.Fatalf("cost = %v", cost)
	}
	if !strings.Contains(audit.String(), `"msg":"agent_loop.tool"`) {
		t.Errorf("tool calls are not audited:\n%s", audit)
	}
}

// Prompt injection: the model picks a path outside the policy. The call is
// denied, counted and audited, nothing is written, and the model is told.
func TestAgentDeniedWriteIsFedBackAndNothingHappens(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim", "authorized_keys")
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "write_file", "args": {"path": "`+victim+`", "content": "ssh-ed25519 AAAA attacker"}}`, 10, 10),
		turn(`{"tool": "read_file", "args": {"path": "/etc/passwd"}}`, 10, 10),
		turn(`{"final": "could not"}`, 10, 10),
	}})
	p := compile(t, agentWorkflow(dir, ""), nil)
	e, audit := engineFor(t, p, sock)
	r := runOnce(t, e, p, map[string]any{"file": "x"})
	wantStatus(t, r, runtime.StatusCompleted)
	if _, err := os.Stat(filepath.Dir(victim)); !os.IsNotExist(err) {
		t.Fatalf("a denied write touched the disk: %v", err)
	}
	if cost := r.Counters.Snapshot(); cost["policy_denials"] != 2 {
		t.Fatalf("denials = %v", cost)
	}
	tr := transcript(t, output(t, r, "agent"))
	for i, want := range []string{"fs.write denied on " + victim, "fs.read denied on /etc/passwd"} {
		obs := tr[i]["observation"].(map[string]any)
		if obs["ok"] != false || !strings.Contains(obs["denied"].(string), want) {
			t.Fatalf("observation %d = %v, want a denial %q", i, obs, want)
		}
	}
	if !strings.Contains(srv.Requests()[1].Messages[3].Content, `"denied"`) {
		t.Fatal("the denial was not fed back to the model")
	}
	if n := strings.Count(audit.String(), `"msg":"policy.denied"`); n != 2 {
		t.Fatalf("policy.denied audited %d times:\n%s", n, audit)
	}
}

func TestAgentReadEnvDeniedValueNeverLeaks(t *testing.T) {
	t.Setenv("KILN_AGENT_TEST_SECRET", "hunter2-do-not-leak")
	t.Setenv("SAFE_GREETING", "hello")
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "read_env", "args": {"key": "KILN_AGENT_TEST_SECRET"}}`, 1, 1),
		turn(`{"tool": "read_env", "args": {"key": "SAFE_GREETING"}}`, 1, 1),
		turn(`{"final": null}`, 1, 1),
	}})
	p := compile(t, agentWorkflow(t.TempDir(), ""), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	rec, _ := json.Marshal(r.Trace)
	if strings.Contains(string(rec), "hunter2") {
		t.Fatal("a denied env read leaked its value")
	}
	tr := transcript(t, output(t, r, "agent"))
	if tr[1]["observation"].(map[string]any)["output"].(map[string]any)["value"] != "hello" {
		t.Fatalf("allowed read = %v", tr[1])
	}
	if r.Counters.Snapshot()["policy_denials"] != 1 {
		t.Fatal("denial not counted")
	}
}

func TestAgentRefusesUndeclaredTools(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "shell_run", "args": {"command": "/bin/sh", "args": ["-c", "id"]}}`, 1, 1),
		turn(`{"final": "ok"}`, 1, 1),
	}})
	p := compile(t, agentWorkflow(t.TempDir(), ""), nil)
	e, audit := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	obs := transcript(t, output(t, r, "agent"))[0]["observation"].(map[string]any)
	if obs["ok"] != false || !strings.Contains(obs["error"].(string), `tool "shell_run" is not available here`) {
		t.Fatalf("observation = %v", obs)
	}
	if !strings.Contains(audit.String(), "agent_loop.tool_refused") {
		t.Fatal("refusal not audited")
	}
}

func TestAgentProtocolErrorsAreObservations(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn("I think I should read the file first.", 1, 1),
		turn(`{"tool": "read_env", "final": 1}`, 1, 1),
		turn(`{"tool": "read_env", "args": {"key": 42}}`, 1, 1),
		turn(`{"final": "done"}`, 1, 1),
	}})
	p := compile(t, agentWorkflow(t.TempDir(), ""), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	tr := transcript(t, output(t, r, "agent"))
	wants := []string{"reply is not JSON", `both "tool" and "final"`, "args.key must be a non-empty string"}
	for i, w := range wants {
		if e := tr[i]["observation"].(map[string]any)["error"].(string); !strings.Contains(e, w) {
			t.Errorf("step %d error = %q, want %q", i+1, e, w)
		}
	}
	if !strings.Contains(srv.Requests()[1].Messages[3].Content, "reply is not JSON") {
		t.Fatal("protocol error not fed back")
	}
}

func TestAgentExhaustedBranch(t *testing.T) {
	loop := turn(`{"tool": "read_env", "args": {"key": "SAFE_X"}}`, 5, 5)
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{loop, loop, loop, loop, loop}})
	p := compile(t, agentWorkflow(t.TempDir(), `
[[nodes]]
id = "gave_up"
type = "fail"
reason = "agent ran out of steps"
[[edges]]
from = "agent"
to = "gave_up"
when = "exhausted"
`), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusFailed, "agent ran out of steps")
	out := output(t, r, "agent")
	if out["result"] != nil || out["steps"] != json.Number("4") || len(out["transcript"].([]any)) != 4 || srv.Calls() != 4 {
		t.Fatalf("output = %v, calls = %d", out, srv.Calls())
	}
	if r.Trace.Entries[0].Branch != "exhausted" {
		t.Fatalf("branch = %v", r.Trace.Entries[0].Branch)
	}
}

func TestAgentMaxTokensExhausts(t *testing.T) {
	loop := turn(`{"tool": "read_env", "args": {"key": "SAFE_X"}}`, 30, 10)
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{loop, loop, loop, loop}})
	p := compile(t, strings.Replace(agentWorkflow(t.TempDir(), ""), "max_steps = 4", "max_steps = 4\nmax_tokens = 70", 1), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	// 40 after step 1 (< 70), 80 after step 2: no third call.
	if srv.Calls() != 2 || r.Trace.Entries[0].Branch != "exhausted" || output(t, r, "agent")["tokens"] != json.Number("80") {
		t.Fatalf("calls = %d, trace = %+v", srv.Calls(), r.Trace.Entries)
	}
}

func TestAgentRunBudgetAborts(t *testing.T) {
	loop := turn(`{"tool": "read_env", "args": {"key": "SAFE_X"}}`, 30, 10)
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{loop, loop, loop, loop}})
	p := compile(t, agentWorkflow(t.TempDir(), "[budget]\nmax_llm_tokens = 50\n"), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusErrored, "node agent (agent_loop)", "max_llm_tokens 50")
	if srv.Calls() != 2 {
		t.Fatalf("calls = %d", srv.Calls())
	}
}

func TestAgentToolErrorsAreObservations(t *testing.T) {
	dir := t.TempDir()
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "read_file", "args": {"path": "`+dir+`/missing.txt"}}`, 1, 1),
		turn(`{"tool": "read_file", "args": {}}`, 1, 1),
		turn(`{"final": "gave up"}`, 1, 1),
	}})
	p := compile(t, agentWorkflow(dir, ""), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	tr := transcript(t, output(t, r, "agent"))
	if e := tr[0]["observation"].(map[string]any)["error"].(string); !strings.Contains(e, "missing.txt") {
		t.Fatalf("read error = %q", e)
	}
	if e := tr[1]["observation"].(map[string]any)["error"].(string); !strings.Contains(e, "path_from") {
		t.Fatalf("missing arg error = %q", e)
	}
	if r.Counters.Snapshot()["policy_denials"] != 0 {
		t.Fatal("a tool error was counted as a denial")
	}
}

func TestAgentDryRunCallsNothing(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn(`{"final": 1}`, 1, 1)}})
	p := compile(t, agentWorkflow(t.TempDir(), ""), nil)
	e, _ := engineFor(t, p, sock)
	r := e.Run(t.Context(), p, runtime.RunOptions{DryRun: true})
	wantStatus(t, r, runtime.StatusCompleted)
	if out := output(t, r, "agent"); out["dry_run"] != true || srv.Calls() != 0 {
		t.Fatalf("output = %v, calls = %d", out, srv.Calls())
	}
}

func TestAgentLoadErrors(t *testing.T) {
	base := `
name = "a"
[[nodes]]
id = "agent"
type = "agent_loop"
backend = "default"
`
	cases := []struct{ body, want string }{
		{`tools = ["read_file"]` + "\ninstructions = \"x\"", "max_steps is required"},
		{"max_steps = 0\ntools = [\"read_file\"]\ninstructions = \"x\"", "max_steps must be within 1..64"},
		{"max_steps = 65\ntools = [\"read_file\"]\ninstructions = \"x\"", "max_steps must be within 1..64"},
		{"max_steps = 2\ntools = []\ninstructions = \"x\"", "tools must list at least one tool"},
		{"max_steps = 2\ntools = [\"delete_file\"]\ninstructions = \"x\"", `tool "delete_file" is not available to agent_loop`},
		{"max_steps = 2\ntools = [\"read_file\", \"read_file\"]\ninstructions = \"x\"", "listed twice"},
		{"max_steps = 2\ntools = [\"read_file\"]", "instructions (or instructions_from) is required"},
		{"max_steps = 2\ntools = [\"read_file\"]\ninstructions = \"x\"\ninstructions_from = \"trigger.x\"", "not both"},
		{"max_steps = 2\ntools = [\"read_file\"]\ninstructions = \"x\"\nmax_tokens = 0", "max_tokens must be at least 1"},
	}
	for _, tc := range cases {
		_, err := tryCompile(base+tc.body, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "node agent (agent_loop)") {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestAgentInstructionsFrom(t *testing.T) {
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn(`{"final": 1}`, 1, 1)}})
	p := compile(t, strings.Replace(agentWorkflow(t.TempDir(), ""), `instructions = "Summarise {{trigger.file}} into `, `instructions_from = "trigger.task"
# `, 1), nil)
	e, _ := engineFor(t, p, sock)
	wantStatus(t, runOnce(t, e, p, map[string]any{"task": "count the files"}), runtime.StatusCompleted)
	if got := srv.Requests()[0].Messages[1].Content; got != "count the files" {
		t.Fatalf("instructions = %q", got)
	}
}

func TestAgentObservationToModelIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	os.WriteFile(big, []byte(strings.Repeat("é", 20_000)), 0o644) // 40,000 bytes
	srv, sock := startMock(t, &mock.Script{Turns: []mock.Turn{
		turn(`{"tool": "read_file", "args": {"path": "`+big+`"}}`, 1, 1),
		turn(`{"final": "read it"}`, 1, 1),
	}})
	p := compile(t, agentWorkflow(dir, ""), nil)
	e, _ := engineFor(t, p, sock)
	r := runOnce(t, e, p, nil)
	wantStatus(t, r, runtime.StatusCompleted)
	sent := srv.Requests()[1].Messages[3].Content
	if len(sent) > 16<<10+100 || !strings.Contains(sent, "observation truncated") || !utf8.ValidString(sent) {
		t.Fatalf("observation sent to the model: %d bytes, valid UTF-8 %v", len(sent), utf8.ValidString(sent))
	}
	kept := transcript(t, output(t, r, "agent"))[0]["observation"].(map[string]any)["output"].(map[string]any)["content"].(string)
	if len(kept) != 40_000 {
		t.Fatalf("transcript kept %d bytes, want the whole file", len(kept))
	}
}
