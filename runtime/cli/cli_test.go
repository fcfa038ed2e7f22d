package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Test node kinds (capability packages are not linked into runtime tests).
func init() {
	EnableServe() // these tests serve as a binary with listeners does
	// cli_echo: output = {"trigger": trigger, "secret": Services.Secret(Key) if Key set}.
	runtime.RegisterNode(runtime.NodeKind{Kind: "cli_echo", Family: "clitest", Prepare: func(n *workflow.Node, _ *runtime.Program) (runtime.NodeFunc, error) {
		key := n.Key
		return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
			out := map[string]any{"trigger": c.Run.Trigger(), "dry_run": c.DryRun()}
			if key != "" {
				v, err := c.Run.Services().Secret(key)
				if err != nil {
					return runtime.Result{}, c.Errorf(runtime.ClassConfig, "%v", err)
				}
				out["secret"] = v
			}
			return runtime.Next(out), nil
		}, nil
	}})
	runtime.RegisterNode(runtime.NodeKind{Kind: "cli_action", Family: "clitest", Prepare: func(n *workflow.Node, _ *runtime.Program) (runtime.NodeFunc, error) {
		what := n.Event
		return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
			switch what {
			case "fail":
				return runtime.Result{Action: runtime.Fail, Reason: "rejected"}, nil
			case "pause":
				return runtime.Result{Action: runtime.Pause, Reason: "approve me"}, nil
			case "deny":
				return runtime.Result{}, &policy.Denial{What: "fs.write", Target: "/etc/x", Reason: "not in the allowlist"}
			}
			return runtime.Next(nil), nil
		}, nil
	}})
	runtime.RegisterExtension(runtime.Extension{
		Name: "clitest",
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&ext.flag, "clitest-flag", "", "test flag")
		},
		Setup: func(_ context.Context, h *runtime.Host) error {
			ext.mu.Lock()
			defer ext.mu.Unlock()
			ext.setupFlag = ext.flag
			if ext.flag == "fail" {
				return fmt.Errorf("cannot set up: bad clitest-flag")
			}
			ext.drain = h.DrainTimeout
			return nil
		},
		Listeners: func(h *runtime.Host) ([]runtime.Listener, error) {
			if h.Program.Workflow.Name != "serve-test" {
				return nil, nil
			}
			return []runtime.Listener{&testListener{}}, nil
		},
		Close: func() error {
			ext.mu.Lock()
			defer ext.mu.Unlock()
			ext.closed++
			return nil
		},
	})
}

var ext struct {
	mu        sync.Mutex
	flag      string
	setupFlag string
	drain     time.Duration
	closed    int
	started   chan struct{}
	drained   bool
}

type testListener struct{}

func (*testListener) Name() string { return "clitest" }

func (*testListener) Serve(ctx context.Context) error {
	close(ext.started)
	<-ctx.Done()
	ext.mu.Lock()
	ext.drained = true
	ext.mu.Unlock()
	return nil
}

func simpleWF(name string, nodes ...workflow.Node) *workflow.Workflow {
	wf := &workflow.Workflow{Name: name, Nodes: nodes,
		StartNodes: []workflow.StartNode{{Name: "main", EntryNode: nodes[0].ID}}}
	for i := 1; i < len(nodes); i++ {
		wf.Edges = append(wf.Edges, workflow.Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	return wf
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, wf *workflow.Workflow, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, Options{Prog: "agent", Workflow: wf, Stdout: &out, Stderr: &errb,
		Stdin: strings.NewReader(stdin), Env: func(k string) string { return env[k] }})
	return result{code, out.String(), errb.String()}
}

func outcome(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("stdout is not the outcome JSON: %v\n%s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return m
}

func TestOnceCompletedWithInput(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"text":"hi <b>","kind":"http","n":1.0}`), 0o600)
	r := run(t, wf, nil, "", "--input", in, "--quiet")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// Pretty-printed, not HTML-escaped, 1.0 kept, kind not spoofable.
	if !strings.Contains(r.stdout, "\n  \"final_value\": {") || !strings.Contains(r.stdout, `"text": "hi <b>"`) ||
		!strings.Contains(r.stdout, `"n": 1.0`) || !strings.Contains(r.stdout, `"kind": "manual"`) {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if r.stderr != "" {
		t.Fatalf("quiet run wrote to stderr: %s", r.stderr)
	}

	// stdin input, non-object payload lands under trigger.input.
	r = run(t, wf, nil, `[1,2]`, "--input", "-", "--quiet")
	m := outcome(t, r)
	if fmt.Sprint(m["final_value"].(map[string]any)["trigger"].(map[string]any)["input"]) != "[1 2]" {
		t.Fatalf("stdin payload: %s", r.stdout)
	}

	r = run(t, wf, nil, `{not json`, "--input", "-")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "agent: --input: - is not valid JSON") {
		t.Fatalf("bad input: %d %s", r.code, r.stderr)
	}
	r = run(t, wf, nil, "", "--input", filepath.Join(t.TempDir(), "missing.json"))
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--input") {
		t.Fatalf("missing input: %d %s", r.code, r.stderr)
	}
}

func TestOnceExitCodes(t *testing.T) {
	failWF := simpleWF("w", workflow.Node{ID: "no", Type: "cli_action", Event: "fail"})
	r := run(t, failWF, nil, "", "--quiet")
	if m := outcome(t, r); r.code != ExitFailed || m["status"] != "failed" || m["reason"] != "rejected" || m["last_node"] != "no" {
		t.Fatalf("failed: %d %s", r.code, r.stdout)
	}

	denyWF := simpleWF("w", workflow.Node{ID: "w1", Type: "cli_action", Event: "deny"})
	r = run(t, denyWF, nil, "", "--quiet")
	if m := outcome(t, r); r.code != ExitFailed || m["status"] != "errored" {
		t.Fatalf("errored: %d %s", r.code, r.stdout)
	}
	if want := "agent: node w1 (cli_action): fs.write denied on /etc/x: not in the allowlist\n"; r.stderr != want {
		t.Fatalf("stderr = %q, want %q", r.stderr, want)
	}

	pauseWF := simpleWF("w", workflow.Node{ID: "p", Type: "cli_action", Event: "pause"}, workflow.Node{ID: "after", Type: "cli_echo"})
	r = run(t, pauseWF, nil, "", "--quiet")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "--state-dir") {
		t.Fatalf("pause without state dir: %d %s", r.code, r.stderr)
	}
	dir := t.TempDir()
	r = run(t, pauseWF, map[string]string{"KILN_STATE_DIR": dir}, "", "--quiet")
	m := outcome(t, r)
	if r.code != ExitPaused || m["status"] != "paused" || m["run_id"] == "" {
		t.Fatalf("paused: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", m["run_id"].(string)+".json")); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--start", "nope"}, `unknown start node "nope"`},
		{[]string{"--log-level", "loud"}, `log level "loud"`},
		{[]string{"--log-format", "xml"}, `log format "xml"`},
		{[]string{"--mode", "daemon"}, `--mode "daemon"`},
		{[]string{"--timeout-secs", "-1"}, "must not be negative"},
		{[]string{"--config", "other.toml"}, "workflow is already loaded"},
		{[]string{"--mode", "serve", "--quiet"}, "nothing to serve"},
	}
	// A binary without the serve loop (nothing links the ops package) says
	// the same: it has nothing to serve either.
	defer func(f func(context.Context, context.CancelFunc, *runtime.Host, []runtime.Extension, Options, func(int, string, ...any) int) int) {
		serveFn = f
	}(serveFn)
	serveFn = nil
	if r := run(t, wf, nil, "", "--mode", "serve", "--quiet"); r.code != ExitUsage || !strings.Contains(r.stderr, nothingToServe) {
		t.Errorf("serve mode without the serve loop: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, nothingToServe)
	}
	serveFn = serveLoop
	for _, c := range cases {
		r := run(t, wf, nil, "", c.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// A node kind no compiled-in family provides is refused before running.
	r := run(t, simpleWF("w", workflow.Node{ID: "classify", Type: "no_such_kind"}), nil, "")
	if r.code != ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "capability not compiled in") ||
		!strings.Contains(r.stderr, "no_such_kind (node classify)") {
		t.Fatalf("missing capability: %d %s", r.code, r.stderr)
	}
	var out, errb bytes.Buffer
	code := Main([]string{"--config", "x.toml"}, Options{Prog: "agent", Workflow: wf, Sealed: true, Stdout: &out, Stderr: &errb})
	if code != ExitUsage || !strings.Contains(errb.String(), "sealed binary runs only its own embedded workflow") {
		t.Fatalf("sealed --config: %d %s", code, errb.String())
	}
	r = run(t, wf, map[string]string{"KILN_DRY_RUN": "maybe"}, "")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "KILN_DRY_RUN") {
		t.Fatalf("bad env value: %d %s", r.code, r.stderr)
	}
	r = run(t, wf, nil, "", "--version")
	if r.code != ExitOK || !strings.HasPrefix(r.stdout, "agent ") || !strings.Contains(r.stdout, "(workflow w)") {
		t.Fatalf("version: %d %q", r.code, r.stdout)
	}
	for _, c := range []struct{ version, module, want string }{
		{"", "", "agent (devel) (workflow w)\n"},
		{"", "v1.2.3", "agent v1.2.3 (workflow w)\n"}, // kiln run's module version
		{"v9.9.9", "v1.2.3", "agent v9.9.9 (workflow w)\n"},
	} {
		out.Reset()
		Main([]string{"--version"}, Options{Prog: "agent", Workflow: wf, Version: c.version, ModuleVersion: c.module, Stdout: &out, Stderr: &errb})
		if out.String() != c.want {
			t.Errorf("--version with Version %q, ModuleVersion %q: %q, want %q", c.version, c.module, out.String(), c.want)
		}
	}
	r = run(t, wf, nil, "", "-h")
	if r.code != ExitOK || !strings.Contains(r.stderr, "-state-dir") || !strings.Contains(r.stderr, "-clitest-flag") {
		t.Fatalf("help: %d %s", r.code, r.stderr)
	}
}

func TestEnvFallbacksAndFlagsWin(t *testing.T) {
	wf := &workflow.Workflow{Name: "w",
		Nodes:      []workflow.Node{{ID: "a", Type: "cli_echo"}, {ID: "b", Type: "cli_echo"}},
		StartNodes: []workflow.StartNode{{Name: "first", EntryNode: "a"}, {Name: "second", EntryNode: "b"}}}
	in := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(in, []byte(`{"from":"env-input"}`), 0o600)
	env := map[string]string{"KILN_START": "second", "KILN_DRY_RUN": "1", "KILN_INPUT": in,
		"KILN_QUIET": "true", "KILN_CLITEST_FLAG": "from-env"}
	r := run(t, wf, env, "")
	m := outcome(t, r)
	fv := m["final_value"].(map[string]any)
	if m["last_node"] != "b" || fv["dry_run"] != true || fv["trigger"].(map[string]any)["from"] != "env-input" {
		t.Fatalf("env fallbacks: %s", r.stdout)
	}
	if ext.setupFlag != "from-env" {
		t.Fatalf("extension flag from env: %q", ext.setupFlag)
	}
	r = run(t, wf, env, "", "--start", "first", "--clitest-flag", "cli")
	if m := outcome(t, r); m["last_node"] != "a" || ext.setupFlag != "cli" {
		t.Fatalf("flags must win: %s, ext %q", r.stdout, ext.setupFlag)
	}
	r = run(t, wf, nil, "", "--clitest-flag", "fail")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "agent: clitest: cannot set up") {
		t.Fatalf("setup failure: %d %s", r.code, r.stderr)
	}
}

func TestRecordAndAuditLog(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "a", Type: "cli_action"}, workflow.Node{ID: "echo", Type: "cli_echo", Key: "KILN_TEST_SECRET_VALUE"})
	wf.Logging = &workflow.Logging{Format: "json"}
	dir := t.TempDir()
	rec := filepath.Join(dir, "sub", "run.json")
	const secret = "hunter2-cli-secret"
	r := run(t, wf, map[string]string{"KILN_TEST_SECRET_VALUE": secret}, "", "--record", rec, "--timeout-secs", "30")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var record map[string]any
	if err := json.Unmarshal(data, &record); err != nil {
		t.Fatalf("record: %v\n%s", err, data)
	}
	cost := record["cost"].(map[string]any)
	if record["status"] != "completed" || record["last_node"] != "echo" || cost["node_executions"].(float64) != 2 ||
		len(record["trace"].(map[string]any)["entries"].([]any)) != 2 {
		t.Fatalf("record: %s", data)
	}
	// The secret was resolved through Services.Secret: it is redacted in
	// the printed outcome and the record.
	for name, text := range map[string]string{"stdout": r.stdout, "record": string(data), "stderr": r.stderr} {
		if strings.Contains(text, secret) {
			t.Fatalf("secret leaked into %s:\n%s", name, text)
		}
	}
	if !strings.Contains(r.stdout, runtime.RedactedMarker) {
		t.Fatalf("stdout: %s", r.stdout)
	}
	// [logging] format = json: the audit log on stderr is JSON lines with
	// the allow-all warning and the workflow events.
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line is not JSON: %q", line)
		}
		msgs = append(msgs, ev["msg"].(string))
	}
	if strings.Join(msgs, ",") != "policy.allow_all,workflow.started,workflow.completed" {
		t.Fatalf("audit events = %v", msgs)
	}
	// A relative [logging] file target is relative to the workflow file.
	wfDir := t.TempDir()
	wf.Source = filepath.Join(wfDir, "workflow.toml")
	wf.Logging = &workflow.Logging{Target: "file:logs/audit.log", Format: "json"}
	r = run(t, wf, map[string]string{"KILN_TEST_SECRET_VALUE": secret}, "")
	logData, err := os.ReadFile(filepath.Join(wfDir, "logs", "audit.log"))
	if err != nil || !strings.Contains(string(logData), `"msg":"workflow.completed"`) || r.stderr != "" {
		t.Fatalf("file target: %v %s (stderr %q)", err, logData, r.stderr)
	}
	// --log-format beats [logging].
	wf.Logging = &workflow.Logging{Format: "json"}
	r = run(t, wf, map[string]string{"KILN_TEST_SECRET_VALUE": secret}, "", "--log-format", "text")
	if !strings.Contains(r.stderr, "msg=workflow.completed") {
		t.Fatalf("text log: %s", r.stderr)
	}
}

func TestServeModeDrainsOnSIGTERM(t *testing.T) {
	wf := simpleWF("serve-test", workflow.Node{ID: "a", Type: "cli_echo"})
	wf.Triggers = []workflow.Trigger{{Type: "interval", Every: "1h", StartNode: "main"}}
	ext.started = make(chan struct{})
	ext.drained = false
	ext.closed = 0
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := Main([]string{"--drain-timeout-secs", "3", "--log-format", "json"}, Options{Prog: "agent", Workflow: wf, Stdout: &out, Stderr: &errb,
			Env: func(string) string { return "" }})
		done <- result{code, out.String(), errb.String()}
	}()
	select {
	case <-ext.started:
	case r := <-done:
		t.Fatalf("serve returned early: %d %s", r.code, r.stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("listener never started (serve mode not inferred from the interval trigger?)")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != ExitOK {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, ev := range []string{"serve.started", "serve.draining", "serve.stopped"} {
			if !strings.Contains(r.stderr, ev) {
				t.Errorf("audit lacks %s:\n%s", ev, r.stderr)
			}
		}
		if !strings.Contains(r.stderr, `"msg":"serve.stopped","exit_code":0}`) {
			t.Errorf("serve.stopped must carry exit_code as a number:\n%s", r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	ext.mu.Lock()
	defer ext.mu.Unlock()
	if !ext.drained || ext.closed != 1 || ext.drain != 3*time.Second {
		t.Fatalf("drained %v closed %d drain %v", ext.drained, ext.closed, ext.drain)
	}
}

func TestServeModeInference(t *testing.T) {
	cases := []struct {
		wf   workflow.Workflow
		mode string
		want bool
	}{
		{workflow.Workflow{}, "", false},
		{workflow.Workflow{HTTPRoutes: []workflow.HTTPRoute{{Method: "POST", Path: "/x"}}}, "", true},
		{workflow.Workflow{HTTPRoutes: []workflow.HTTPRoute{{Method: "POST", Path: "/x"}}}, "once", false},
		{workflow.Workflow{Triggers: []workflow.Trigger{{Type: "cron"}}}, "", true},
		{workflow.Workflow{Triggers: []workflow.Trigger{{Type: "fs_watch"}}}, "", true},
		{workflow.Workflow{Triggers: []workflow.Trigger{{Type: "internal.event"}}}, "", false},
		{workflow.Workflow{}, "serve", true},
	}
	for i, c := range cases {
		got, err := serveMode(c.mode, &c.wf)
		if err != nil || got != c.want {
			t.Errorf("case %d: %v %v", i, got, err)
		}
	}
}

// TestEnvNameOfEveryFlag: each flag's variable is KILN_ and its name upper
// cased with '-' as '_', as the docs promise (KILN_STATE_DIR).
func TestEnvNameOfEveryFlag(t *testing.T) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	defineFlags(fs, &settings{})
	fs.VisitAll(func(f *flag.Flag) {
		if got, want := EnvName(f.Name), "KILN_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", f.Name, got, want)
		}
	})
	if got := EnvName("state-dir"); got != "KILN_STATE_DIR" {
		t.Errorf("EnvName(state-dir) = %q", got)
	}
}
