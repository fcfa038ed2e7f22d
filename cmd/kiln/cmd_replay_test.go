package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/tape"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// copyExample copies examples/NAME (child workflows, prompts, schemas
// included) into a temporary directory, replacing old with new in every
// TOML file, and returns the copied workflow.toml.
func copyExample(t *testing.T, name string, replace ...string) string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", name)
	dst := filepath.Join(t.TempDir(), name)
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".toml") {
			s := string(data)
			for i := 0; i+1 < len(replace); i += 2 {
				s = strings.ReplaceAll(s, replace[i], replace[i+1])
			}
			data = []byte(s)
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "workflow.toml")
}

// edit writes a copy of the workflow wf with old replaced by new, next to
// it (so its child workflows still resolve).
func edit(t *testing.T, wf, old, new string) string {
	t.Helper()
	data, err := os.ReadFile(wf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not contain %q", wf, old)
	}
	out := filepath.Join(filepath.Dir(wf), "edited.toml")
	if err := os.WriteFile(out, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeJSON(t *testing.T, v any) string {
	t.Helper()
	data, _ := json.Marshal(v)
	p := filepath.Join(t.TempDir(), "input.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// record runs wf once with --record and returns the tape.
func record(t *testing.T, wf string, args ...string) string {
	t.Helper()
	tp := filepath.Join(t.TempDir(), "tape.json")
	code, stdout, stderr := runKiln(t, append([]string{"run", wf, "--quiet", "--record", tp}, args...)...)
	if _, err := os.Stat(tp); err != nil {
		t.Fatalf("no tape (exit %d)\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	return tp
}

// replayResult replays tp against against with --json.
func replayResult(t *testing.T, tp, against string) (int, *tape.Result) {
	t.Helper()
	code, stdout, stderr := runKiln(t, "replay", tp, "--against", against, "--json")
	var rep cli.ReplayReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Results) != 1 {
		t.Fatalf("replay exit %d: %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	return code, rep.Results[0]
}

func readTape(t *testing.T, tp string) *tape.Tape {
	t.Helper()
	tt, err := tape.Read(tp)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// statusServer answers like a health endpoint and echoes the
// Authorization header it received; after stop() any request fails the
// test (a replay must send nothing).
func statusServer(t *testing.T) (url string, hits *atomic.Int64, stop func()) {
	t.Helper()
	var closed atomic.Bool
	hits = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closed.Load() {
			t.Errorf("request during replay: %s %s", r.Method, r.URL)
		}
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"healthy": true, "auth": r.Header.Get("Authorization")})
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String(), hits, func() { closed.Store(true) }
}

func startReplayMock(t *testing.T, script string) (*mock.Server, string) {
	t.Helper()
	s, err := mock.LoadScript(script)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kr") // short: a unix socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "intel.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := mock.New(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.ServeUnix(ctx, ln) }()
	t.Cleanup(func() { cancel(); ln.Close(); <-done })
	return srv, sock
}

// Every example that runs once without an outside service kiln tests
// cannot provide records a tape that replays the same against the same
// workflow.
func TestReplayExamplesSame(t *testing.T) {
	t.Setenv("USER", "alice")
	_, sock := startReplayMock(t, "../../examples/classifier/intel-mock.toml")
	statusURL, _, _ := statusServer(t)
	tokenURL := tokenServer(t)
	// A stand-in for the tickets MCP server of mcp-reconcile (stdio); only
	// that case needs node.
	ticketsCmd := func(t *testing.T) string {
		stub, _ := filepath.Abs(filepath.Join("testdata", "replay", "tickets-mcp.js"))
		cmd, _ := json.Marshal([]string{testtool.Command(t, "node"), stub})
		return string(cmd)
	}
	cases := []struct {
		name    string
		replace []string
		args    func(t *testing.T, dir, wfDir string) []string
		status  string
	}{
		{name: "hello", replace: []string{"/tmp/kiln-hello/", "OUT/"}, status: "completed",
			args: func(t *testing.T, dir, wfDir string) []string {
				return []string{"--input", writeJSON(t, map[string]any{"output_path": filepath.Join(dir, "hello.txt")})}
			}},
		{name: "classifier", status: "completed", args: func(t *testing.T, dir, wfDir string) []string {
			return []string{"--intel-unix", sock, "--intel-route-all", "--preflight=warn",
				"--input", writeJSON(t, map[string]any{"text": "The update broke my build again."})}
		}},
		{name: "fanout", status: "completed", args: func(t *testing.T, dir, wfDir string) []string {
			return []string{"--input", writeJSON(t, map[string]any{"items": []any{
				map[string]any{"name": "a", "size": 3}, map[string]any{"name": "b", "size": 12}}})}
		}},
		{name: "nightly-report", replace: []string{"/var/tmp/kiln-report", "OUT"}, status: "completed",
			args: func(t *testing.T, dir, wfDir string) []string {
				t.Setenv("REPORT_DIR", dir)
				return []string{"--mode", "once"}
			}},
		{name: "approval", replace: []string{"/tmp/kiln-approval", "OUT"}, status: "paused",
			args: func(t *testing.T, dir, wfDir string) []string {
				plan := filepath.Join(dir, "plan.txt")
				os.WriteFile(plan, []byte("rotate the signing key\n"), 0o644)
				return []string{"--state-dir", t.TempDir(), "--input",
					writeJSON(t, map[string]any{"plan": plan, "target": filepath.Join(dir, "applied.txt")})}
			}},
		{name: "cron-poller", replace: []string{"https://status.example.com/**", statusURL + "/**"}, status: "completed",
			args: func(t *testing.T, dir, wfDir string) []string {
				t.Setenv("STATUS_URL", statusURL+"/api/health")
				t.Setenv("STATUS_TOKEN", "s3cr3t-status-token-value")
				return []string{"--mode", "once"}
			}},
		{name: "triage-agent", replace: []string{"/var/spool/kiln-inbox", "OUT", "https://login.example.com/oauth2/token", tokenURL + "/oauth2/token"},
			status: "completed", args: func(t *testing.T, dir, wfDir string) []string {
				// The agent loop's scripted turns read and write in the inbox
				// (the copied script names it), through the tape's fs requests.
				_, sock := startReplayMock(t, filepath.Join(wfDir, "intel-mock.toml"))
				ticket := filepath.Join(dir, "ticket-1.txt")
				os.WriteFile(ticket, []byte("production login is down for all EU users\n"), 0o644)
				t.Setenv("NOTIFY_CLIENT_ID", "client-id-for-tests")
				t.Setenv("NOTIFY_CLIENT_SECRET", "client-secret-for-tests-1")
				return []string{"--mode", "once", "--start", "on_file", "--preflight=warn", "--intel-unix", sock,
					"--input", writeJSON(t, map[string]any{"path": ticket})}
			}},
		{name: "mcp-reconcile", status: "completed",
			replace: []string{`["/usr/local/bin/tickets-mcp", "--stdio"]`, "TICKETS_CMD", "/etc/kiln/**", "OUT/**"},
			args: func(t *testing.T, dir, wfDir string) []string {
				desired := filepath.Join(dir, "queue.json")
				os.WriteFile(desired, []byte(`{"owner": "ops", "size": 5}`), 0o644)
				t.Setenv("TICKETS_TOKEN", "tickets-token-for-tests")
				return []string{"--mode", "once", "--start", "on_change", "--preflight=warn",
					"--input", writeJSON(t, map[string]any{"resource_uri": "tickets://queues/main", "desired": desired})}
			}},
		{name: "webhook", args: func(t *testing.T, dir, wfDir string) []string {
			return []string{"--mode", "once", "--preflight=warn", "--input", writeJSON(t, map[string]any{"body": map[string]any{"action": "opened"}})}
		}},
		{name: "voice", args: func(t *testing.T, dir, wfDir string) []string {
			return []string{"--mode", "once", "--preflight=warn", "--input", writeJSON(t, map[string]any{"body": map[string]any{"text": "hi"}})}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			os.MkdirAll(out, 0o755)
			for i := 1; i < len(c.replace); i += 2 {
				c.replace[i] = strings.ReplaceAll(c.replace[i], "OUT", out)
				if c.replace[i] == "TICKETS_CMD" {
					c.replace[i] = ticketsCmd(t)
				}
			}
			wf := copyExample(t, c.name, c.replace...)
			tp := record(t, wf, c.args(t, out, filepath.Dir(wf))...)
			tt := readTape(t, tp)
			if c.status != "" && tt.Status != c.status {
				t.Fatalf("recorded status %s, want %s: %s", tt.Status, c.status, tt.Detail)
			}
			tmp := t.TempDir() // a paused replay's private state goes here, and goes
			t.Setenv("TMPDIR", tmp)
			code, res := replayResult(t, tp, wf)
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Fatalf("the replay left %v behind", left)
			}
			if code != cli.ExitOK || !res.Same {
				t.Fatalf("replay exit %d, result %+v, divergence %+v", code, res, res.Divergence)
			}
		})
	}
}

// A replay answers every outside request from the tape: nothing reaches
// the network (the server fails the test), no file is written (the output
// directory is read-only and stays empty), the environment is the tape's.
func TestReplayPerformsNothing(t *testing.T) {
	t.Setenv("USER", "alice")
	statusURL, hits, stop := statusServer(t)
	t.Setenv("STATUS_URL", statusURL+"/api/health")
	t.Setenv("STATUS_TOKEN", "s3cr3t-status-token-value")
	out := t.TempDir()
	hello := copyExample(t, "hello", "/tmp/kiln-hello/", out+"/")
	target := filepath.Join(out, "hello.txt")
	helloTape := record(t, hello, "--input", writeJSON(t, map[string]any{"output_path": target}))
	poller := copyExample(t, "cron-poller", "https://status.example.com/**", statusURL+"/**")
	pollerTape := record(t, poller, "--mode", "once")
	if hits.Load() != 1 {
		t.Fatalf("recording made %d requests, want 1", hits.Load())
	}
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(out, 0o755) })
	stop()
	t.Setenv("USER", "mallory")
	t.Setenv("STATUS_URL", "http://127.0.0.1:9/elsewhere")

	for _, c := range []struct{ tape, wf string }{{helloTape, hello}, {pollerTape, poller}} {
		code, res := replayResult(t, c.tape, c.wf)
		if code != cli.ExitOK || !res.Same {
			t.Fatalf("replay of %s: exit %d, %+v", c.wf, code, res)
		}
	}
	if hits.Load() != 1 {
		t.Fatalf("the replay sent %d requests", hits.Load()-1)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Fatalf("the replay wrote %v", entries)
	}
}

// A secret (a [[secrets]] entry the request header carries, and the server
// echoes) never reaches the tape.
func TestTapeHoldsNoSecret(t *testing.T) {
	const secret = "s3cr3t-status-token-value"
	statusURL, _, _ := statusServer(t)
	t.Setenv("STATUS_URL", statusURL+"/api/health")
	t.Setenv("STATUS_TOKEN", secret)
	wf := copyExample(t, "cron-poller", "https://status.example.com/**", statusURL+"/**")
	tp := record(t, wf, "--mode", "once")
	data, err := os.ReadFile(tp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Fatalf("the tape holds the secret:\n%s", data)
	}
	if !strings.Contains(string(data), "[REDACTED]") || !strings.Contains(string(data), "{{secret:STATUS_TOKEN}}") {
		t.Fatalf("the tape shows neither the redacted echo nor the header's placeholder:\n%s", data)
	}
}

// A changed template, prompt or branch is reported as a divergence at the
// node that changed, with the old and new values; a request the tape
// cannot answer is reported, never sent.
func TestReplayDivergence(t *testing.T) {
	t.Setenv("USER", "alice")
	srv, sock := startReplayMock(t, "../../examples/classifier/intel-mock.toml")
	out := t.TempDir()
	hello := copyExample(t, "hello", "/tmp/kiln-hello/", out+"/")
	helloTape := record(t, hello, "--input", writeJSON(t, map[string]any{"output_path": filepath.Join(out, "hello.txt")}))
	classifier := copyExample(t, "classifier")
	clsTape := record(t, classifier, "--intel-unix", sock, "--intel-route-all", "--preflight=warn",
		"--input", writeJSON(t, map[string]any{"text": "The update broke my build again."}))
	calls := srv.Calls()

	t.Run("template", func(t *testing.T) {
		code, res := replayResult(t, helloTape, edit(t, hello, "Hello, {{value}}!", "Hi, {{value}}!"))
		d := res.Divergence
		if code != cli.ExitFailed || res.Same || d == nil || d.Node != "greeting" || d.What != "output" ||
			!strings.Contains(toJSON(d.Old), "Hello, alice") || !strings.Contains(toJSON(d.New), "Hi, alice") {
			t.Fatalf("exit %d, %+v", code, res)
		}
		// The write of the new content is not on the tape: reported, not performed.
		if len(res.Unanswered) != 1 || res.Unanswered[0].Node != "save" || res.Unanswered[0].Kind != "fs.write" {
			t.Fatalf("unanswered = %+v", res.Unanswered)
		}
	})
	t.Run("prompt", func(t *testing.T) {
		wf := edit(t, classifier, "Classify the sentiment", "Please classify the sentiment")
		code, res := replayResult(t, clsTape, wf)
		d := res.Divergence
		if code != cli.ExitFailed || d == nil || d.What != "request" || d.Node != "classify" ||
			len(res.Unanswered) != 1 || res.Unanswered[0].Kind != "llm.complete" ||
			!strings.Contains(string(res.Unanswered[0].Request), "Please classify") ||
			!strings.Contains(string(res.Unanswered[0].Recorded), "Classify the sentiment") {
			t.Fatalf("exit %d, %+v", code, res)
		}
	})
	t.Run("branch", func(t *testing.T) {
		wf := edit(t, classifier, `expr = "classify.parsed.label"`, `expr = "classify.parsed.confidence"`)
		code, res := replayResult(t, clsTape, wf)
		d := res.Divergence
		if code != cli.ExitFailed || d == nil || d.Node != "route" || d.What != "branch" || d.Old != "negative" {
			t.Fatalf("exit %d, %+v", code, res)
		}
	})
	if srv.Calls() != calls {
		t.Fatalf("replays reached the intelligence backend (%d calls)", srv.Calls()-calls)
	}
}

func toJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// An unreadable tape is exit 2; a record of an older kiln is not a tape.
func TestReplayUnreadable(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"workflow": "hello", "status": "completed"}`), 0o644)
	code, _, stderr := runKiln(t, "replay", bad, "--against", "../../examples/hello/workflow.toml")
	if code != cli.ExitUsage || !strings.Contains(stderr, "not a kiln tape") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
}

// A tape recorded by `kiln run` replays the same against the workflow's
// sealed build (BIN replay, through kiln replay --against BIN), and a tape
// the sealed binary recorded replays the same against the TOML; the
// sealed binary's replay writes nothing either.
func TestReplaySealed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a sealed binary")
	}
	t.Setenv("USER", "alice")
	out := t.TempDir()
	wf := copyExample(t, "hello", "/tmp/kiln-hello/", out+"/")
	bin := filepath.Join(t.TempDir(), "hello")
	if code, _, stderr := runKiln(t, "build", wf, "-o", bin); code != cli.ExitOK {
		t.Fatalf("kiln build: exit %d\n%s", code, stderr)
	}
	target := filepath.Join(out, "hello.txt")
	input := writeJSON(t, map[string]any{"output_path": target})
	fromRun := record(t, wf, "--input", input)

	fromBin := filepath.Join(t.TempDir(), "sealed-tape.json")
	cmd := exec.Command(bin, "--quiet", "--input", input, "--record", fromBin)
	if outb, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, outb)
	}
	os.Remove(target)

	code, stdout, stderr := runKiln(t, "replay", fromRun, "--against", bin)
	if code != cli.ExitOK || !strings.Contains(stdout, ": same (completed") {
		t.Fatalf("replay against the sealed binary: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, res := replayResult(t, fromBin, wf); code != cli.ExitOK || !res.Same {
		t.Fatalf("sealed tape against the TOML: exit %d, %+v", code, res.Divergence)
	}
	// A changed workflow against the sealed binary's tape: exit 5.
	changed := edit(t, wf, "Hello, {{value}}!", "Hi, {{value}}!")
	if code, res := replayResult(t, fromBin, changed); code != cli.ExitFailed || res.Divergence == nil || res.Divergence.Node != "greeting" {
		t.Fatalf("changed workflow: exit %d, %+v", code, res.Divergence)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a replay wrote %s", target)
	}

	// An intelligence workflow: its sealed build replays a kiln run tape
	// with no backend configured (BIN replay --json directly).
	_, sock := startReplayMock(t, "../../examples/classifier/intel-mock.toml")
	cls := copyExample(t, "classifier")
	clsBin := filepath.Join(t.TempDir(), "classifier")
	if code, _, stderr := runKiln(t, "build", cls, "-o", clsBin); code != cli.ExitOK {
		t.Fatalf("kiln build: exit %d\n%s", code, stderr)
	}
	clsTape := record(t, cls, "--intel-unix", sock, "--intel-route-all", "--preflight=warn",
		"--input", writeJSON(t, map[string]any{"text": "The update broke my build again."}))
	outb, err := exec.Command(clsBin, "replay", "--json", clsTape).Output()
	var rep cli.ReplayReport
	if err != nil || json.Unmarshal(outb, &rep) != nil || !rep.Same || len(rep.Results) != 1 || rep.Results[0].NewStatus != "completed" {
		t.Fatalf("%s replay --json: %v\n%s", clsBin, err, outb)
	}
}

// A tape of MCP calls on the reference server (a tool call and a resource
// read) replays the same without starting the server: the wrapper that
// starts it counts its starts.
func TestReplayMCP(t *testing.T) {
	node := testtool.Command(t, "node")
	script := filepath.Join(testtool.RepoRoot(t), ".cache", "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		testtool.Missing(t, "MCP replay: %s is not installed (run `make tools`)", script)
	}
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	wrapper := filepath.Join(dir, "everything.sh")
	os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\necho start >> %q\nexec %q %q stdio\n", starts, node, script)), 0o755)
	cmd, _ := json.Marshal([]string{wrapper})
	wf := filepath.Join(dir, "workflow.toml")
	os.WriteFile(wf, []byte(fmt.Sprintf(`
name = "mcp-replay"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "echo"

[[mcp_servers]]
name = "everything"
command = %s
allow_tools = ["echo"]
allow_resources = ["demo://resource/static/document/*"]

[policy.mcp]
tools = ["echo"]
resources = ["demo://resource/*"]

[[nodes]]
id = "echo"
type = "call_mcp_tool"
tool = "echo"
args_from = "trigger.args"

[[nodes]]
id = "doc"
type = "read_mcp_resource"
resource_from = "trigger.doc"

[[edges]]
from = "echo"
to = "doc"
`, cmd)), 0o644)
	input := writeJSON(t, map[string]any{"args": map[string]any{"message": "hello from the tape"},
		"doc": "demo://resource/static/document/architecture.md"})
	tp := record(t, wf, "--input", input)
	tt := readTape(t, tp)
	if tt.Status != "completed" || len(tt.Interactions) != 2 || tt.Interactions[0].Kind != "mcp.call_tool" ||
		!strings.Contains(string(tt.Interactions[0].Response), "hello from the tape") {
		t.Fatalf("tape: status %s, %d interactions: %s", tt.Status, len(tt.Interactions), tt.Detail)
	}
	before, _ := os.ReadFile(starts)
	if code, res := replayResult(t, tp, wf); code != cli.ExitOK || !res.Same {
		t.Fatalf("replay: exit %d, %+v", code, res.Divergence)
	}
	after, _ := os.ReadFile(starts)
	if string(after) != string(before) {
		t.Fatalf("the replay started the MCP server (%q, then %q)", before, after)
	}
	// A changed tool argument is a request the tape cannot answer: reported, not sent.
	tt.Trigger["args"] = map[string]any{"message": "changed"}
	data, _ := tape.Encode(tt)
	tp2 := filepath.Join(dir, "changed-args.json")
	os.WriteFile(tp2, data, 0o600)
	code, res := replayResult(t, tp2, wf)
	if code != cli.ExitFailed || res.Divergence == nil || res.Divergence.Node != "echo" || res.Divergence.What != "request" {
		t.Fatalf("changed argument: exit %d, %+v", code, res.Divergence)
	}
	if after2, _ := os.ReadFile(starts); string(after2) != string(before) {
		t.Fatal("the replay of a changed argument started the MCP server")
	}
}

// tokenServer is an OAuth2 token endpoint on loopback (client credentials).
func tokenServer(t *testing.T) string {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "access-token-for-tests", "token_type": "bearer", "expires_in": 3600})
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// --dry-run explains each node of the hello example and writes nothing; a
// path outside the policy is explained as a denial with its reason.
func TestDryRunExplainsHello(t *testing.T) {
	t.Setenv("USER", "alice")
	out := t.TempDir()
	wf := copyExample(t, "hello", "/tmp/kiln-hello/", out+"/")
	target := filepath.Join(out, "hello.txt")
	code, _, stderr := runKiln(t, "run", wf, "--quiet", "--dry-run", "--input", writeJSON(t, map[string]any{"output_path": target}))
	if code != cli.ExitOK || !strings.Contains(stderr, "dry run of hello") ||
		!regexp.MustCompile(`(?m)^\s+3\s+save\s+write_file\s+write_file bytes=\d+ path="`+regexp.QuoteMeta(target)+`"\s+allowed$`).MatchString(stderr) {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatal("the dry run wrote the file")
	}
	code, _, stderr = runKiln(t, "run", wf, "--quiet", "--dry-run", "--input", writeJSON(t, map[string]any{"output_path": "/etc/kiln-dry-run.txt"}))
	if code != cli.ExitFailed || !regexp.MustCompile(`(?m)^\s+3\s+save\s+write_file\s+not run\s+DENIED: fs.write denied on /etc/kiln-dry-run.txt: `).MatchString(stderr) {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

// In serve mode, --record-dir (here from KILN_RECORD_DIR) writes one tape
// per route run, without the secret; the tape replays the same.
func TestRecordDirServe(t *testing.T) {
	const secret = "serve-status-token-0b9e"
	status := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"state": "down", "n": 17, "token": "`+secret+`"}`)
	}))
	defer status.Close()
	dir := t.TempDir()
	wfPath := writeWorkflow(t, dir, strings.Replace(statusWF, "URL", status.URL, 1))
	tapes := filepath.Join(dir, "tapes")
	reply, stderr := serveOnce(t, wfPath, []string{"STATUS_TOKEN=" + secret, "KILN_RECORD_DIR=" + tapes},
		`{"url":"`+status.URL+`/status"}`)
	if !strings.Contains(string(reply), `"down"`) {
		t.Fatalf("reply %s\n%s", reply, stderr)
	}
	entries, err := os.ReadDir(tapes)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "tape-") {
		t.Fatalf("tapes: %v %v", entries, err)
	}
	tp := filepath.Join(tapes, entries[0].Name())
	data, _ := os.ReadFile(tp)
	if strings.Contains(string(data), secret) {
		t.Fatalf("the tape holds the secret:\n%s", data)
	}
	tt := readTape(t, tp)
	if tt.Trigger["kind"] != "http" || tt.StartNode != "web" || len(tt.Interactions) != 1 {
		t.Fatalf("tape: trigger %v, start %s, %d interactions", tt.Trigger, tt.StartNode, len(tt.Interactions))
	}
	if code, res := replayResult(t, tp, wfPath); code != cli.ExitOK || !res.Same {
		t.Fatalf("replay: exit %d, %+v", code, res.Divergence)
	}
}
