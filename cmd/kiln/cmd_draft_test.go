package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/capabilities/spec/reference"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// draftGreetTOML is a valid workflow: read USER, write a greeting under out.
func draftGreetTOML(out string) string {
	return fmt.Sprintf(`name = "greet"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "user"

[[nodes]]
id = "user"
type = "read_env"
key = "USER"

[[nodes]]
id = "greeting"
type = "template_render"
template = "Hello, {{value}}!"
input_from = "user"

[[nodes]]
id = "where"
type = "template_render"
template = "%s/hello.txt"

[[nodes]]
id = "save"
type = "write_file"
path_from = "where.rendered"
content_from = "greeting.rendered"

[[edges]]
from = "user"
to = "greeting"

[[edges]]
from = "greeting"
to = "where"

[[edges]]
from = "where"
to = "save"

[policy.env]
read_keys = ["USER"]

[policy.fs]
write = ["%s/**"]
`, out, out)
}

// turn is one [[turns]] entry whose content is a fenced workflow.
func turn(workflow string, expect ...string) string {
	var b strings.Builder
	b.WriteString("[[turns]]\ncontent = '''\nHere is the workflow.\n```toml\n")
	b.WriteString(workflow)
	b.WriteString("```\n'''\n")
	if len(expect) > 0 {
		q, _ := json.Marshal(expect)
		fmt.Fprintf(&b, "expect = %s\n", q)
	}
	return b.String()
}

// draftWithMock serves turns with `kiln intel-mock` on a Unix socket and
// runs `kiln draft` against it.
func draftWithMock(t *testing.T, turns string, args ...string) (code int, stdout, stderr string, mockLog *intelMockBuffer) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kd") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	addr, mockLog := startIntelMockScript(t, turns, "--socket", filepath.Join(dir, "m.sock"))
	var out, errOut bytes.Buffer
	code = runDraft(context.Background(), append(strings.Fields(addr), args...), &out, &errOut)
	return code, out.String(), errOut.String(), mockLog
}

func mustNotExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written (%v)", p, err)
		}
	}
}

func TestDraftValidFirstTurn(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "greet.toml")
	code, stdout, stderr, _ := draftWithMock(t, turn(draftGreetTOML(dir)), "--goal", "write a greeting for $USER", "-o", wf, "--json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	data, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "# DRAFT drafted by `kiln draft` from a goal") || !strings.Contains(string(data), `# goal: "write a greeting for $USER"`) {
		t.Fatalf("header:\n%s", data)
	}
	if _, err := gen.Load(wf, gen.LoadOptions{}); err != nil {
		t.Fatalf("the written draft does not load: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "greet.review.md"))
	if err != nil || !strings.Contains(string(md), "# Review: draft "+wf) {
		t.Fatalf("review: %v\n%s", err, md)
	}
	var review struct {
		Workflow string `json:"workflow"`
		Families []struct {
			ID string `json:"id"`
		} `json:"families"`
		Needs struct {
			Needs []struct {
				ID string `json:"id"`
			} `json:"needs"`
		} `json:"needs"`
		Rounds int `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(stdout), &review); err != nil {
		t.Fatalf("--json: %v\n%s", err, stdout)
	}
	if review.Workflow != "greet" || review.Rounds != 1 || len(review.Families) < 4 || review.Families[3].ID != "env" {
		t.Fatalf("review JSON: %+v", review)
	}
	found := false
	for _, n := range review.Needs.Needs {
		found = found || n.ID == "filesystem:"+dir+":rw"
	}
	if !found {
		t.Fatalf("the review must list the filesystem need of %s: %+v", dir, review.Needs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("want exactly the draft and its review in %s, got %v", dir, entries)
	}
}

// The first draft is invalid; the second turn is answered only when the
// repair request quotes the issues (the mock's expect), so exit 0 proves
// they were fed back.
func TestDraftRepairedFromFedBackIssues(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "greet.toml")
	good := draftGreetTOML(dir)
	bad := strings.Replace(good, `type = "read_env"`, `type = "env_read"`, 1)
	turns := turn(bad) + turn(good, "unknown_node_type", "node \"user\" (env_read)", "(line 8)")
	code, _, stderr, mockLog := draftWithMock(t, turns, "--goal", "greet", "-o", wf)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\nmock:\n%s", code, stderr, mockLog)
	}
	if !strings.Contains(stderr, "round 1: 1 issue(s), first unknown_node_type") || !strings.Contains(stderr, "round 2: accepted") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	if data, _ := os.ReadFile(wf); strings.Contains(string(data), "env_read") {
		t.Fatal("the rejected draft was written")
	}
}

func TestDraftNeverValidatesExit5NothingWritten(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "x.toml")
	bad := strings.Replace(draftGreetTOML(dir), `type = "read_env"`, `type = "env_read"`, 1)
	turns := turn(bad) + turn(bad) + turn(bad) + turn(draftGreetTOML(dir))
	code, _, stderr, mockLog := draftWithMock(t, turns, "--goal", "greet", "--repairs", "2", "-o", wf)
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, cli.ExitFailed, stderr)
	}
	if !strings.Contains(stderr, "never validated after 3 round(s)") || !strings.Contains(stderr, "nothing written") {
		t.Fatalf("stderr:\n%s", stderr)
	}
	if strings.Contains(mockLog.String(), "call 4") {
		t.Fatal("more rounds than 1 + --repairs")
	}
	mustNotExist(t, wf, filepath.Join(dir, "x.review.md"))
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// shell_run under a profile that forbids the shell family is refused: exit
// 5, nothing written, and the command never ran.
func TestDraftShellRunRefusedByProfile(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "touch.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755)
	shell := fmt.Sprintf(`name = "toucher"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "touch"

[[nodes]]
id = "touch"
type = "shell_run"
command = %q

[policy.shell]
commands = [%q]
`, script, script)
	profile := filepath.Join(dir, "noshell.toml")
	os.WriteFile(profile, []byte("name = \"noshell\"\ndeny = [\"shell\"]\n"), 0o644)
	wf := filepath.Join(dir, "toucher.toml")
	code, stdout, stderr, _ := draftWithMock(t, turn(shell)+turn(shell), "--goal", "touch a file", "--profile", profile, "--repairs", "1", "-o", wf, "--json")
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, cli.ExitFailed, stderr)
	}
	var res struct {
		OK       bool `json:"ok"`
		Refused  bool `json:"refused"`
		Rounds   int  `json:"rounds"`
		Findings []struct {
			Code    string `json:"code"`
			Refusal bool   `json:"refusal"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.OK || !res.Refused || res.Rounds != 2 || len(res.Findings) == 0 || res.Findings[0].Code != "draft_family_forbidden" {
		t.Fatalf("--json on refusal: %v %+v\n%s", err, res, stdout)
	}
	if !strings.Contains(stderr, "was refused") || !strings.Contains(stderr, "draft_family_forbidden") || !strings.Contains(stderr, `family shell is not allowed by profile "noshell"`) {
		t.Fatalf("stderr:\n%s", stderr)
	}
	mustNotExist(t, wf, filepath.Join(dir, "toucher.review.md"), marker)

	// Without the profile the same draft is accepted and written, and
	// still nothing ran: drafting performs no node.
	code, _, stderr, _ = draftWithMock(t, turn(shell), "--goal", "touch a file", "-o", wf)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, "toucher.review.md")), "| shell | kiln\\_shell | node touch (shell\\_run) |") {
		t.Fatal("the review must list the shell family")
	}
	mustNotExist(t, marker)
}

func TestDraftUsageErrors(t *testing.T) {
	dir := t.TempDir()
	backends := filepath.Join(dir, "b.toml")
	os.WriteFile(backends, []byte("[[intelligence.backends]]\nname = \"c\"\nprovider = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"K\"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "x.toml", "--intel-unix", "/nonexistent"}, "--goal is required"},
		{[]string{"--goal", "g", "--intel-unix", "/nonexistent"}, "-o is required"},
		{[]string{"--goal", "g", "-o", "x.toml"}, "give one backend"},
		{[]string{"--goal", "g", "-o", "x.toml", "--intel-unix", "/a", "--intel-http", "http://127.0.0.1:1/"}, "give one backend"},
		{[]string{"--goal", "g", "-o", "x.toml", "--backend", "c"}, "--backend needs --backends"},
		{[]string{"--goal", "g", "-o", "x.toml", "--backend", "nope", "--backends", backends}, `declares no backend "nope"`},
		{[]string{"--goal", "g", "-o", "x.toml", "--intel-http", "http://user:pw@127.0.0.1:1/"}, "must not carry credentials"},
		{[]string{"--goal", "g", "-o", "x.toml", "--intel-unix", "/a", "--repairs", "11"}, "--repairs must be 0..10"},
		{[]string{"--goal", "g", "-o", "x.toml", "--intel-unix", "/a", "--profile", filepath.Join(dir, "missing.toml")}, "profile"},
		{[]string{"--goal", "g", "-o", "x.toml", "--intel-unix", "/a", "--policy-ceiling", backends}, "unknown key"},
	} {
		var stderr bytes.Buffer
		if code := runDraft(context.Background(), tc.args, io.Discard, &stderr); code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, stderr.String(), tc.want)
		}
	}
	// A backend that is not there: exit 5, nothing written.
	wf := filepath.Join(dir, "w.toml")
	var stderr bytes.Buffer
	if code := runDraft(context.Background(), []string{"--goal", "g", "-o", wf, "--intel-unix", filepath.Join(dir, "none.sock")}, io.Discard, &stderr); code != cli.ExitFailed {
		t.Fatalf("unreachable backend: exit %d %s", code, stderr.String())
	}
	mustNotExist(t, wf)
}

// The exact request a provider receives over HTTP: a loopback server
// speaking the Anthropic messages API gets the goal, the dialect reference
// (in system) and the key from the environment, which kiln never prints.
func TestDraftProviderRequestOverHTTP(t *testing.T) {
	dir := t.TempDir()
	const key = "sk-ant-draft-test-7f3e"
	t.Setenv("KILN_DRAFT_TEST_KEY", key)
	var (
		mu     sync.Mutex
		header http.Header
		path   string
		body   struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			System    string `json:"system"`
			Messages  []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
	)
	reply, _ := json.Marshal(map[string]any{
		"content":     []map[string]string{{"type": "text", "text": "```toml\n" + draftGreetTOML(dir) + "```"}},
		"stop_reason": "end_turn",
		"usage":       map[string]int{"input_tokens": 9000, "output_tokens": 300},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		header, path = r.Header.Clone(), r.URL.Path
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply)
	}))
	defer srv.Close()
	backends := filepath.Join(dir, "backends.toml")
	os.WriteFile(backends, []byte(fmt.Sprintf(`[[intelligence.backends]]
name = "claude"
provider = "anthropic"
model = "claude-test"
api_key_env = "KILN_DRAFT_TEST_KEY"
base_url = %q
`, srv.URL)), 0o644)
	wf := filepath.Join(dir, "greet.toml")
	var stdout, stderr bytes.Buffer
	goal := "Greet the current user in a file under " + dir
	code := runDraft(context.Background(), []string{"--goal", goal, "--backend", "claude", "--backends", backends, "-o", wf, "--json"}, &stdout, &stderr)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if path != "/v1/messages" || header.Get("x-api-key") != key || header.Get("anthropic-version") != "2023-06-01" {
		t.Fatalf("request: path %q, headers %v", path, header)
	}
	if body.Model != "claude-test" || body.MaxTokens != 8192 {
		t.Fatalf("model %q max_tokens %d", body.Model, body.MaxTokens)
	}
	if len(body.Messages) != 1 || body.Messages[0].Role != "user" || !strings.Contains(body.Messages[0].Content, goal) {
		t.Fatalf("the user message must carry the goal: %+v", body.Messages)
	}
	if !strings.Contains(body.System, string(reference.Markdown())) {
		t.Error("the system prompt must carry the whole dialect reference (docs/reference.md's text)")
	}
	for _, want := range []string{"# Workflow dialect reference", "### shell_run", "| `path_from` | context path | yes |", "## Constraints"} {
		if !strings.Contains(body.System, want) {
			t.Errorf("the system prompt lacks %q", want)
		}
	}
	for name, text := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "draft": readFile(t, wf), "review": readFile(t, filepath.Join(dir, "greet.review.md"))} {
		if strings.Contains(text, key) {
			t.Fatalf("the API key appears in %s", name)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The walk-through of docs/goal-mode.md: its scripted turns give a first
// draft kiln rejects and a repair it accepts under the example's profile
// and policy ceiling.
func TestDraftGoalModeExample(t *testing.T) {
	ex := filepath.Join(testtool.RepoRoot(t), "examples", "goal-mode")
	turns, err := os.ReadFile(filepath.Join(ex, "turns.toml"))
	if err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(t.TempDir(), "status.toml")
	code, _, stderr, _ := draftWithMock(t, string(turns),
		"--goal", "Every time it runs, fetch https://status.example.com/api/status.json and write its status field to /var/lib/kiln-status/status.txt",
		"--profile", filepath.Join(ex, "profile.toml"), "--policy-ceiling", filepath.Join(ex, "ceiling.toml"), "-o", wf)
	if code != cli.ExitOK || !strings.Contains(stderr, "round 1: 1 issue(s), first unknown_node_type") || !strings.Contains(stderr, "after 2 round(s)") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if _, err := gen.Load(wf, gen.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The JSON-RPC transport over HTTP (kiln intel-mock --http) works as the
// socket does.
func TestDraftOverIntelHTTP(t *testing.T) {
	dir := t.TempDir()
	addr, _ := startIntelMockScript(t, turn(draftGreetTOML(dir)), "--http", "127.0.0.1:0", "--quiet")
	wf := filepath.Join(dir, "greet.toml")
	var stderr bytes.Buffer
	if code := runDraft(context.Background(), append(strings.Fields(addr), "--goal", "greet", "-o", wf), io.Discard, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if _, err := gen.Load(wf, gen.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
}
