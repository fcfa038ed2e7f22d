package sandbox

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/testtool"

	// Families the examples use beyond those child_test.go links.
	_ "github.com/kilnworks/kiln/capabilities/llm"
	_ "github.com/kilnworks/kiln/capabilities/oidc"
	_ "github.com/kilnworks/kiln/capabilities/rego"
)

// Every example with a [policy] runs confined here and does its work:
// its outside services are stood in on loopback. An example's files are
// copied into the test's temp folder with its outside addresses and fixed
// paths (/tmp/kiln-rego, /var/spool/kiln-inbox, ...) replaced by the
// stand-ins' and the test's own, in its [policy] too: the ruleset is then
// derived from that policy, exactly as it would be from the original.
// goal-mode and gogenerate have no [policy] (they are a kiln gen script
// and a go generate recipe), so there is nothing to confine.

// exampleCopy copies examples/name into a temp folder, replacing each
// old, new pair of repl in every file, and returns the folder.
func exampleCopy(t *testing.T, name string, repl ...string) string {
	t.Helper()
	src := filepath.Join(testtool.RepoRoot(t), "examples", name)
	dst := filepath.Join(t.TempDir(), name)
	r := strings.NewReplacer(repl...)
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(r.Replace(string(data))), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runExample runs the workflow file once through the CLI in a confined
// child with args and env, and checks that it confined itself.
func runExample(t *testing.T, workflowFile string, args []string, env ...string) childRun {
	t.Helper()
	run := runChild(t, "cli", childSpec{Example: workflowFile, Args: append(args, "--log-level", "info")}, env...)
	if !strings.Contains(run.Stderr, "sandbox.applied") {
		t.Errorf("%s: no sandbox.applied audit event (exit %d)\n%s", workflowFile, run.Code, run.Stderr)
	}
	return run
}

// outcome decodes a run's outcome from its stdout.
func outcome(t *testing.T, run childRun) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(run.Stdout), &out); err != nil {
		t.Fatalf("outcome %q: %v (exit %d)\n%s", run.Stdout, err, run.Code, run.Stderr)
	}
	return out
}

// serveExample starts the workflow file in serve mode, confined, on a
// free loopback port, waits until it answers, and returns its base URL;
// the child is stopped (SIGTERM) at the end of the test.
func serveExample(t *testing.T, workflowFile string, args []string, env ...string) (string, *lockedWriter) {
	t.Helper()
	a := addr(freePort(t))
	data, _ := json.Marshal(childSpec{Example: workflowFile, Args: append([]string{"--bind", a, "--log-level", "info"}, append(args, "serve")...)})
	spec := filepath.Join(t.TempDir(), "spec.json")
	writeFile(t, spec, string(data))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=cli", childSpecEnv+"="+spec, "TMPDIR="+t.TempDir())
	cmd.Env = append(cmd.Env, env...)
	stderr := &lockedWriter{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	base := "http://" + a
	for range 300 { // up to 15 s for the child to listen
		if resp, err := http.Get(base + "/.well-known/kiln"); err == nil {
			resp.Body.Close()
			return base, stderr
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before it listened\n%s", workflowFile, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not listen on %s\n%s", workflowFile, a, stderr.String())
	return "", nil
}

// lockedWriter holds a child's stderr, which the test reads while the
// child writes it.
type lockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// tlsStandIn serves h over HTTPS on loopback and returns its URL and a
// CA bundle (SSL_CERT_FILE) that trusts it.
func tlsStandIn(t *testing.T, h http.Handler) (string, string) {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	return srv.URL, ca
}

// intelMock serves kiln's intel mock with the script on a Unix socket
// and returns the socket's path.
func intelMock(t *testing.T, script string) string {
	t.Helper()
	s, err := mock.LoadScript(script)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "intel.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		mock.New(s).ServeUnix(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sock
}

// ticketsArg makes this test binary mcp-reconcile's stand-in for
// tickets-mcp: an MCP server over stdio with the queue resource and the
// apply_queue_changes tool. It runs inside the confined child's domain
// and writes nothing: what it did comes back in its tool result.
const ticketsArg = "-kiln-sandbox-tickets-mcp"

// ticketsToken is the TICKETS_TOKEN the stand-in expects in its
// environment (the example passes it through [mcp_servers.env]).
const ticketsToken = "tickets-token-3f9a"

func serveTickets() int {
	s := server.NewMCPServer("tickets-stand-in", "1.0.0", server.WithResourceCapabilities(true, false), server.WithToolCapabilities(false))
	s.AddResource(mcp.NewResource("tickets://queues/triage", "triage", mcp.WithMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json",
				Text: `{"owner": "alice", "limit": 5}`}}, nil
		})
	s.AddTool(mcp.NewTool("apply_queue_changes"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if os.Getenv("TICKETS_TOKEN") != ticketsToken {
			return mcp.NewToolResultError("no TICKETS_TOKEN"), nil
		}
		args, _ := json.Marshal(req.Params.Arguments)
		return mcp.NewToolResultText("applied: " + string(args)), nil
	})
	if err := server.ServeStdio(s); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func post(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// confinedExamples are the examples TestExamplesConfined runs.
var confinedExamples = []string{"hello", "nightly-report", "fanout", "rego-policy", "approval", "classifier",
	"cron-poller", "mcp-reconcile", "triage-agent", "webhook", "voice"}

// TestEveryExampleWithAPolicyIsConfined: a new example with a [policy]
// cannot be left out of TestExamplesConfined unnoticed.
func TestEveryExampleWithAPolicyIsConfined(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testtool.RepoRoot(t), "examples", "*", "workflow.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	for _, f := range files {
		wf, err := gen.Load(f, gen.LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(filepath.Dir(f))
		if confined, _ := confine.Wanted(wf); confined != slices.Contains(confinedExamples, name) {
			t.Errorf("examples/%s: confined at start-up %v, run by TestExamplesConfined %v", name, confined, !confined)
		}
	}
}

func TestExamplesConfined(t *testing.T) {
	requireLandlock(t)
	root := testtool.RepoRoot(t)
	var ran []string // the subtests, which must be confinedExamples
	subtest := func(name string, f func(t *testing.T)) {
		ran = append(ran, name)
		t.Run(name, f)
	}
	defer func() {
		if !slices.Equal(ran, confinedExamples) {
			t.Errorf("ran %v, want every one of %v", ran, confinedExamples)
		}
	}()

	subtest("hello", func(t *testing.T) {
		// hello's fs.write is /tmp/kiln-hello/**: leave that as it was
		// found (the example is run as it is).
		out := filepath.Join("/tmp/kiln-hello", "sandbox-test-"+filepath.Base(t.TempDir())+".txt")
		_, existed := os.Stat(filepath.Dir(out))
		t.Cleanup(func() {
			os.Remove(out)
			if existed != nil {
				os.Remove(filepath.Dir(out)) // only if empty: another test may be using it
			}
		})
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, `{"output_path":"`+out+`"}`)
		run := runExample(t, filepath.Join(root, "examples/hello/workflow.toml"), []string{"--input", input}, "USER=sandbox-test")
		if run.Code != 0 {
			t.Errorf("exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		if data, err := os.ReadFile(out); err != nil || !strings.HasPrefix(string(data), "Hello, sandbox-test!") {
			t.Errorf("hello wrote %q, %v", data, err)
		}
	})

	subtest("nightly-report", func(t *testing.T) {
		// Shell probes (uptime, uname) in child workflows.
		reportDir := filepath.Join(t.TempDir(), "report")
		dir := exampleCopy(t, "nightly-report", "/var/tmp/kiln-report", reportDir)
		run := runExample(t, filepath.Join(dir, "workflow.toml"), []string{"--mode", "once"}, "REPORT_DIR="+reportDir)
		if run.Code != 0 {
			t.Errorf("exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		if data, err := os.ReadFile(reportDir + "/report.txt"); err != nil || !strings.Contains(string(data), "load average") || !strings.Contains(string(data), "kernel: Linux") {
			t.Errorf("nightly-report wrote %q, %v", data, err)
		}
	})

	subtest("fanout", func(t *testing.T) {
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, `{"items":[{"name":"a","size":3},{"name":"b","size":40}]}`)
		run := runExample(t, filepath.Join(root, "examples/fanout/workflow.toml"), []string{"--input", input})
		out := outcome(t, run)
		if run.Code != 0 || out["status"] != "completed" || !strings.Contains(run.Stdout, "a: size 3") || !strings.Contains(run.Stdout, "b: size 40") {
			t.Errorf("exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
	})

	subtest("rego-policy", func(t *testing.T) {
		base := t.TempDir()
		dir := exampleCopy(t, "rego-policy", "/tmp/kiln-rego", base)
		mkdir(t, base+"/data/safe")
		mkdir(t, base+"/data/private")
		mkdir(t, base+"/out")
		writeFile(t, base+"/data/safe/report.txt", "revenue up 4%")
		writeFile(t, base+"/data/private/keys.txt", "do not read")
		run := runExample(t, filepath.Join(dir, "workflow.toml"), []string{"--input", filepath.Join(dir, "input.json")})
		if run.Code != 0 {
			t.Errorf("exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		if data, err := os.ReadFile(base + "/out/summary.txt"); err != nil || string(data) != "Summary of "+base+"/data/safe/report.txt: revenue up 4%" {
			t.Errorf("summary %q, %v", data, err)
		}
		// Rego still denies what the allowlist (and the ruleset) allow.
		run = runExample(t, filepath.Join(dir, "workflow.toml"), []string{"--input", filepath.Join(dir, "input-denied.json")})
		if out := outcome(t, run); out["error_class"] != "policy" || !strings.Contains(run.Stdout, "data.agent.allow is false") {
			t.Errorf("denied input: exit %d, outcome %s", run.Code, run.Stdout)
		}
	})

	subtest("approval", func(t *testing.T) {
		base := t.TempDir()
		dir := exampleCopy(t, "approval", "/tmp/kiln-approval", base)
		writeFile(t, base+"/plan.txt", "the plan")
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, `{"plan":"`+base+`/plan.txt","target":"`+base+`/applied/plan.txt"}`)
		state := t.TempDir()
		wf := filepath.Join(dir, "workflow.toml")
		run := runExample(t, wf, []string{"--input", input, "--state-dir", state})
		out := outcome(t, run)
		id, _ := out["run_id"].(string)
		if out["status"] != "paused" || id == "" {
			t.Fatalf("first run: exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		if _, err := os.Stat(base + "/applied/plan.txt"); err == nil {
			t.Fatal("the plan was applied before the approval")
		}
		run = runExample(t, wf, []string{"--state-dir", state, "--resume", id})
		if out := outcome(t, run); out["status"] != "completed" {
			t.Errorf("resumed run: exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		if data, err := os.ReadFile(base + "/applied/plan.txt"); err != nil || string(data) != "the plan" {
			t.Errorf("applied %q, %v", data, err)
		}
	})

	subtest("classifier", func(t *testing.T) {
		// The intelligence backend: kiln's intel mock on a Unix socket,
		// answering from the example's own script.
		sock := intelMock(t, filepath.Join(root, "examples/classifier/intel-mock.toml"))
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, `{"text": "The update broke my build again."}`)
		run := runExample(t, filepath.Join(root, "examples/classifier/workflow.toml"),
			[]string{"--intel-unix", sock, "--intel-route-all", "--input", input})
		if out := outcome(t, run); out["last_node"] != "escalate" || !strings.Contains(run.Stdout, "ESCALATE (0.92)") {
			t.Errorf("exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
	})

	subtest("cron-poller", func(t *testing.T) {
		// The status endpoint: HTTPS on loopback, trusted through
		// SSL_CERT_FILE (which the ruleset grants for reading).
		const token = "status-token-8c2d"
		var mu sync.Mutex
		var seen []string
		url, ca := tlsStandIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"healthy": true}`)
		}))
		dir := exampleCopy(t, "cron-poller", "https://status.example.com", url)
		run := runExample(t, filepath.Join(dir, "workflow.toml"), []string{"--mode", "once"},
			"STATUS_URL="+url+"/api/health", "STATUS_TOKEN="+token, "SSL_CERT_FILE="+ca)
		if out := outcome(t, run); out["status"] != "completed" || out["last_node"] != "ok" {
			t.Errorf("exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || seen[0] != "GET /api/health Bearer "+token {
			t.Errorf("the status endpoint saw %q", seen)
		}
	})

	subtest("mcp-reconcile", func(t *testing.T) {
		// tickets-mcp: this test binary as a stdio MCP server, started
		// inside the domain; the desired state moves from /etc/kiln.
		desired := t.TempDir()
		cmd, _ := json.Marshal([]string{os.Args[0], ticketsArg})
		dir := exampleCopy(t, "mcp-reconcile", `["/usr/local/bin/tickets-mcp", "--stdio"]`, string(cmd), "/etc/kiln", desired)
		writeFile(t, desired+"/triage.json", `{"owner": "bob", "limit": 5}`)
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, `{"resource_uri": "tickets://queues/triage", "desired": "`+desired+`/triage.json"}`)
		record := filepath.Join(t.TempDir(), "record", "run.json")
		run := runExample(t, filepath.Join(dir, "workflow.toml"), []string{"--mode", "once", "--input", input, "--record", record},
			"TICKETS_TOKEN="+ticketsToken)
		if out := outcome(t, run); out["status"] != "completed" || out["last_node"] != "done" {
			t.Fatalf("exit %d, outcome %s\n%s", run.Code, run.Stdout, run.Stderr)
		}
		data, err := os.ReadFile(record)
		if err != nil || !strings.Contains(string(data), "applied: ") || !strings.Contains(string(data), "bob") {
			t.Errorf("the stand-in did not apply the difference: %v\n%.2000s", err, data)
		}
	})

	subtest("triage-agent", func(t *testing.T) {
		// Serve mode: a file dropped into the inbox (fs_watch) starts the
		// agent (the intel mock answers from the example's script: read the
		// file, write the .triage note, finish), whose event starts the
		// notification: an OAuth2 client-credentials token from the token
		// stand-in, then a POST to the notify stand-in, both HTTPS on
		// loopback.
		const clientID, clientSecret, token = "triage-client", "triage-client-secret-0e4b", "notify-token-a71c"
		tokenURL, ca := tlsStandIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id, secret, ok := r.BasicAuth(); !ok || id != clientID || secret != clientSecret || r.URL.Path != "/oauth2/token" {
				http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"access_token":"`+token+`","token_type":"Bearer","expires_in":3600}`)
		}))
		notified := make(chan string, 4)
		notifyURL, _ := tlsStandIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			notified <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization") + " " + string(body)
			w.WriteHeader(http.StatusNoContent)
		}))
		inbox, logs := t.TempDir(), t.TempDir()
		dir := exampleCopy(t, "triage-agent", "https://login.example.com/oauth2/token", tokenURL+"/oauth2/token",
			"https://notify.example.com", notifyURL, "/var/spool/kiln-inbox", inbox, "/var/log/kiln", logs)
		sock := intelMock(t, filepath.Join(dir, "intel-mock.toml"))
		_, stderr := serveExample(t, filepath.Join(dir, "workflow.toml"), []string{"--intel-unix", sock},
			"NOTIFY_URL="+notifyURL+"/notify", "NOTIFY_CLIENT_ID="+clientID, "NOTIFY_CLIENT_SECRET="+clientSecret, "SSL_CERT_FILE="+ca)
		writeFile(t, inbox+"/ticket-1.txt", "Production login is down for all EU users.")
		select {
		case got := <-notified:
			if !strings.HasPrefix(got, "POST /notify Bearer "+token+" ") || !strings.Contains(got, "p1") {
				t.Errorf("the notify stand-in got %q", got)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no notification\n%s", stderr.String())
		}
		if data, err := os.ReadFile(inbox + "/ticket-1.txt.triage"); err != nil || !strings.HasPrefix(string(data), "p1: ") {
			t.Errorf("the agent's note: %q, %v", data, err)
		}
		if data, err := os.ReadFile(logs + "/triage-audit.log"); err != nil || !strings.Contains(string(data), "sandbox.applied") {
			t.Errorf("audit log: %.500q, %v", data, err)
		}
	})

	subtest("webhook", func(t *testing.T) {
		const secret = "webhook-secret-5b1e"
		base, stderr := serveExample(t, filepath.Join(root, "examples/webhook/workflow.toml"), []string{"--state-dir", t.TempDir()}, "GITHUB_WEBHOOK_SECRET="+secret)
		body := `{"action":"opened","pull_request":{"number":7},"sender":{"login":"octo"}}`
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		code, answer := post(t, base+"/webhooks/github", body, map[string]string{
			"Content-Type": "application/json", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))})
		if code != 202 || !strings.Contains(answer, `"received": true`) {
			t.Errorf("POST = %d %s\n%s", code, answer, stderr.String())
		}
		if code, _ := post(t, base+"/webhooks/github", body, map[string]string{"X-Hub-Signature-256": "sha256=00"}); code != 401 {
			t.Errorf("a wrong signature: %d, want 401", code)
		}
		if !strings.Contains(stderr.String(), "sandbox.applied") {
			t.Errorf("no sandbox.applied audit event\n%s", stderr.String())
		}
	})

	subtest("voice", func(t *testing.T) {
		base, stderr := serveExample(t, filepath.Join(root, "examples/voice/workflow.toml"), nil, "TWILIO_WEBHOOK_CREDS=twilio:secret")
		req, _ := http.NewRequest("POST", base+"/voice/incoming", strings.NewReader("SpeechResult=hello+there"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("twilio", "secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(answer), "You said: hello there") {
			t.Errorf("POST = %d %s\n%s", resp.StatusCode, answer, stderr.String())
		}
		if !strings.Contains(stderr.String(), "sandbox.applied") {
			t.Errorf("no sandbox.applied audit event\n%s", stderr.String())
		}
	})
}
