package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/beneath/beneathtest"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// fsLayout is an allowlisted read directory, an allowlisted write
// directory and a directory outside the policy, each with a file.
type fsLayout struct{ in, out, outside string }

func newLayout(t *testing.T) fsLayout {
	root := t.TempDir()
	l := fsLayout{in: mkdir(t, root+"/in"), out: mkdir(t, root+"/out"), outside: mkdir(t, root+"/outside")}
	writeFile(t, l.in+"/file", "inside")
	writeFile(t, l.outside+"/secret", "SECRET")
	return l
}

func (l fsLayout) policy() *workflow.Policy {
	return &workflow.Policy{FS: &workflow.FSPolicy{Read: []string{l.in + "/**"}, Write: []string{l.out + "/**"}}}
}

func confinedWorkflow(name string, pol *workflow.Policy) *workflow.Workflow {
	return &workflow.Workflow{Name: name, Policy: pol, Sandbox: &workflow.Sandbox{Landlock: "best_effort"}}
}

func findResult(t *testing.T, run childRun, op, target string) result {
	t.Helper()
	for _, r := range run.Results {
		if r.Op == op && r.Target == target {
			return r
		}
	}
	t.Fatalf("no result for %s %s\nstdout:\n%s\nstderr:\n%s", op, target, run.Stdout, run.Stderr)
	return result{}
}

// TestLandlockAloneRefusesOutsidePolicy: with kiln's own checks out of
// the way (plain system calls), the kernel refuses a read and a write
// outside [policy.fs] and allows them inside, on every thread.
func TestLandlockAloneRefusesOutsidePolicy(t *testing.T) {
	abi := requireLandlock(t)
	l := newLayout(t)
	// A write directory that does not exist yet is created at start-up,
	// so the grant stays on it, not on its parent.
	root := filepath.Dir(l.in)
	pol := l.policy()
	pol.FS.Write = append(pol.FS.Write, root+"/fresh/**")
	run := runChild(t, "probe", childSpec{
		Workflow: confinedWorkflow("fs", pol),
		Ops: []op{
			{Op: "write", Target: root + "/fresh/made"},
			{Op: "write", Target: root + "/loose"},
			{Op: "read", Target: l.in + "/file"},
			{Op: "read", Target: l.outside + "/secret"},
			{Op: "write", Target: l.out + "/new"},
			{Op: "write", Target: l.outside + "/new"},
			{Op: "write", Target: l.in + "/new"}, // read-only
			{Op: "read_thread", Target: l.outside + "/secret"},
			{Op: "read_thread", Target: l.in + "/file"},
		},
	})
	if run.Code != 0 || run.Report == nil || !run.Report.Confined || run.Report.ABI != abi {
		t.Fatalf("child exit %d, report %+v\n%s", run.Code, run.Report, run.Stderr)
	}
	if r := findResult(t, run, "read", l.in+"/file"); !r.OK || r.Data != "inside" {
		t.Errorf("read inside fs.read: %+v", r)
	}
	for _, r := range []result{findResult(t, run, "read", l.outside+"/secret"), findResult(t, run, "read_thread", l.outside+"/secret")} {
		if r.OK || !strings.Contains(r.Err, "permission denied") {
			t.Errorf("%s outside the policy: %+v, want permission denied", r.Op, r)
		}
	}
	if r := findResult(t, run, "read_thread", l.in+"/file"); !r.OK {
		t.Errorf("read inside from the locked thread: %+v", r)
	}
	if r := findResult(t, run, "write", l.out+"/new"); !r.OK {
		t.Errorf("write inside fs.write: %+v", r)
	}
	if r := findResult(t, run, "write", root+"/fresh/made"); !r.OK {
		t.Errorf("write under a fs.write directory created at start-up: %+v", r)
	}
	for _, target := range []string{l.outside + "/new", l.in + "/new", root + "/loose"} {
		if r := findResult(t, run, "write", target); r.OK || !strings.Contains(r.Err, "permission denied") {
			t.Errorf("write %s: %+v, want permission denied", target, r)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("%s was created", target)
		}
	}
}

// TestSymlinkSwapZeroEscapes: a name inside the allowlist that is swapped
// with a symlink to a file outside it, as fast as the parent can, never
// leads a read or a write outside: Landlock checks the object opened.
func TestSymlinkSwapZeroEscapes(t *testing.T) {
	requireLandlock(t)
	l := newLayout(t)
	writeFile(t, l.in+"/target", "inside")
	if err := os.Symlink(l.outside+"/secret", l.in+"/decoy"); err != nil {
		t.Fatal(err)
	}
	victim := l.outside + "/victim"
	writeFile(t, victim, "")
	writeFile(t, l.out+"/wtarget", "")
	if err := os.Symlink(victim, l.out+"/wdecoy"); err != nil {
		t.Fatal(err)
	}
	stopRead := beneathtest.Swap(t, l.in+"/target", l.in+"/decoy")
	stopWrite := beneathtest.Swap(t, l.out+"/wtarget", l.out+"/wdecoy")
	const n = 3000
	run := runChild(t, "probe", childSpec{
		Workflow: confinedWorkflow("race", l.policy()),
		Ops:      []op{{Op: "read", Target: l.in + "/target", Repeat: n}, {Op: "write", Target: l.out + "/wtarget", Repeat: n}},
	})
	swaps := stopRead() + stopWrite()
	if run.Code != 0 || run.Report == nil || !run.Report.Confined {
		t.Fatalf("child exit %d, report %+v\n%s", run.Code, run.Report, run.Stderr)
	}
	read := findResult(t, run, "read", l.in+"/target")
	if read.Seen["SECRET"] != 0 {
		t.Errorf("%d of %d reads escaped to the file outside the policy", read.Seen["SECRET"], n)
	}
	if read.Seen["inside"] == 0 || read.Seen["error"] == 0 {
		t.Errorf("the race did not run both ways: %v", read.Seen)
	}
	if data, _ := os.ReadFile(victim); len(data) != 0 {
		t.Errorf("%d writes escaped to the file outside the policy", len(data))
	}
	write := findResult(t, run, "write", l.out+"/wtarget")
	t.Logf("%d swaps; reads %v; writes %v", swaps, read.Seen, write.Seen)
}

// catWorkflow runs one shell_run of command with args from the trigger.
func catWorkflow(l fsLayout, command string) *workflow.Workflow {
	pol := l.policy()
	pol.Shell = &workflow.ShellPolicy{Commands: []string{"/bin/cat", "/usr/bin/touch"}}
	return &workflow.Workflow{
		Name:       "shell",
		StartNodes: []workflow.StartNode{{Name: "main", Source: "manual", EntryNode: "run"}},
		Nodes:      []workflow.Node{{ID: "run", Type: "shell_run", Command: command, ArgsFrom: "trigger.args"}},
		Policy:     pol,
	}
}

// shellRun runs the workflow once in a child with args and returns the
// shell_run output.
func shellRun(t *testing.T, wf *workflow.Workflow, args ...string) map[string]any {
	t.Helper()
	input := filepath.Join(t.TempDir(), "input.json")
	data, _ := json.Marshal(map[string]any{"args": args})
	writeFile(t, input, string(data))
	run := runChild(t, "cli", childSpec{Workflow: wf, Args: []string{"--input", input, "--log-level", "info"}})
	var outcome struct {
		Status     string         `json:"status"`
		FinalValue map[string]any `json:"final_value"`
	}
	if err := json.Unmarshal([]byte(run.Stdout), &outcome); err != nil || outcome.Status != "completed" {
		t.Fatalf("outcome %q (%v), exit %d\n%s", run.Stdout, err, run.Code, run.Stderr)
	}
	if !strings.Contains(run.Stderr, "sandbox.applied") {
		t.Errorf("no sandbox.applied audit event:\n%s", run.Stderr)
	}
	return outcome.FinalValue
}

// TestShellChildConfined: a command the policy permits inherits the
// domain: /bin/cat reads inside fs.read but not outside it, and touch
// creates a file inside fs.write but not outside it.
func TestShellChildConfined(t *testing.T) {
	requireLandlock(t)
	l := newLayout(t)
	cat := catWorkflow(l, "/bin/cat")
	if out := shellRun(t, cat, l.in+"/file"); out["stdout"] != "inside" || out["exit_code"] != 0.0 {
		t.Errorf("cat inside fs.read: %v", out)
	}
	out := shellRun(t, cat, l.outside+"/secret")
	if out["exit_code"] == 0.0 || strings.Contains(out["stdout"].(string), "SECRET") || !strings.Contains(out["stderr"].(string), "Permission denied") {
		t.Errorf("cat outside fs.read: %v, want Permission denied", out)
	}
	touch := catWorkflow(l, "/usr/bin/touch")
	if out := shellRun(t, touch, l.out+"/made"); out["exit_code"] != 0.0 {
		t.Errorf("touch inside fs.write: %v", out)
	}
	if out := shellRun(t, touch, l.outside+"/made"); out["exit_code"] == 0.0 {
		t.Errorf("touch outside fs.write: %v, want a failure", out)
	}
	if _, err := os.Stat(l.outside + "/made"); err == nil {
		t.Errorf("a permitted command created a file outside fs.write")
	}
}

// TestTCPPorts: connect reaches the port of a declared endpoint and not
// another one; bind works on the serve address only.
func TestTCPPorts(t *testing.T) {
	abi := requireLandlock(t)
	if abi < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules", abi)
	}
	declared, other := loopbackListener(t), loopbackListener(t)
	serve, undeclared := freePort(t), freePort(t)
	pol := &workflow.Policy{HTTP: &workflow.HTTPPolicy{URLs: []string{"http://127.0.0.1:" + strconv.Itoa(declared) + "/*"}}}
	run := runChild(t, "probe", childSpec{
		Workflow: &workflow.Workflow{Name: "net", Policy: pol},
		Request:  confine.Request{Binds: []string{addr(serve)}},
		Ops: []op{{Op: "connect", Target: addr(declared)}, {Op: "connect", Target: addr(other)},
			{Op: "bind", Target: addr(serve)}, {Op: "bind", Target: addr(undeclared)}},
	})
	if run.Code != 0 || run.Report == nil || !run.Report.Confined {
		t.Fatalf("child exit %d, report %+v\n%s", run.Code, run.Report, run.Stderr)
	}
	if !slices.Contains(run.Report.Enforced, "net.connect") || !slices.Contains(run.Report.Enforced, "net.bind") {
		t.Errorf("enforced = %v", run.Report.Enforced)
	}
	if r := findResult(t, run, "connect", addr(declared)); !r.OK {
		t.Errorf("connect to the declared port: %+v", r)
	}
	if r := findResult(t, run, "connect", addr(other)); r.OK || !strings.Contains(r.Err, "permission denied") {
		t.Errorf("connect to an undeclared port: %+v, want permission denied", r)
	}
	if r := findResult(t, run, "bind", addr(serve)); !r.OK {
		t.Errorf("bind the serve address: %+v", r)
	}
	if r := findResult(t, run, "bind", addr(undeclared)); r.OK || !strings.Contains(r.Err, "permission denied") {
		t.Errorf("bind an undeclared port: %+v, want permission denied", r)
	}
}

// TestRequiredWithoutLandlockExits6: landlock = "required" on a kernel
// without Landlock (simulated) refuses to start with exit 6, through the
// preflight and through the start-up hook; best_effort starts unconfined
// and says so.
func TestRequiredWithoutLandlockExits6(t *testing.T) {
	l := newLayout(t)
	wf := catWorkflow(l, "/bin/cat")
	input := filepath.Join(t.TempDir(), "input.json")
	writeFile(t, input, `{"args":["`+l.in+`/file"]}`)
	wf.Sandbox = &workflow.Sandbox{Landlock: "required"}
	for _, build := range []bool{true, false} {
		run := runChild(t, "cli", childSpec{Workflow: wf, Build: build, Args: []string{"--input", input}}, noLandlockEnv+"=1")
		if run.Code != 6 || !strings.Contains(run.Stderr, `landlock = "required"`) && !strings.Contains(run.Stderr, "sandbox (") {
			t.Errorf("required, build %v: exit %d, want 6\n%s", build, run.Code, run.Stderr)
		}
		if strings.Contains(run.Stdout, "inside") {
			t.Errorf("required, build %v: the node ran", build)
		}
	}
	needsRun := runChild(t, "cli", childSpec{Workflow: wf, Build: true, Args: []string{"needs"}}, noLandlockEnv+"=1")
	var rep struct {
		Status  string
		Sandbox confine.Report
	}
	if err := json.Unmarshal([]byte(needsRun.Stdout), &rep); err != nil || needsRun.Code != 6 || rep.Status != "blocked" || rep.Sandbox.Refused == "" || rep.Sandbox.ABI != 0 {
		t.Errorf("needs: exit %d, %+v (%v)\n%s", needsRun.Code, rep, err, needsRun.Stdout)
	}

	wf.Sandbox.Landlock = "best_effort"
	run := runChild(t, "cli", childSpec{Workflow: wf, Build: true, Args: []string{"--input", input}}, noLandlockEnv+"=1")
	if run.Code != 0 || !strings.Contains(run.Stderr, "sandbox.unconfined") || !strings.Contains(run.Stderr, "no Landlock") {
		t.Errorf("best_effort without Landlock: exit %d\n%s", run.Code, run.Stderr)
	}
}

// TestPreflightReportsABI: `BIN needs` reports the ABI and what will be
// enforced, before anything is applied.
func TestPreflightReportsABI(t *testing.T) {
	abi := requireLandlock(t)
	l := newLayout(t)
	run := runChild(t, "cli", childSpec{Workflow: catWorkflow(l, "/bin/cat"), Build: true, Args: []string{"needs"}})
	var rep struct{ Sandbox *confine.Report }
	if err := json.Unmarshal([]byte(run.Stdout), &rep); err != nil || run.Code != 0 || rep.Sandbox == nil {
		t.Fatalf("needs: exit %d (%v)\n%s\n%s", run.Code, err, run.Stdout, run.Stderr)
	}
	if s := rep.Sandbox; s.ABI != abi || s.Mode != "best_effort" || !slices.Contains(s.Enforced, "fs") || s.Confined {
		t.Errorf("sandbox = %+v, want ABI %d, planned fs rules", s, abi)
	}
}

// TestServeReportsConfinement: a serving binary answers on its --bind
// address while confined, and /.well-known/kiln and /metrics say so.
func TestServeReportsConfinement(t *testing.T) {
	abi := requireLandlock(t)
	port := freePort(t)
	wf := confinedWorkflow("serve", &workflow.Policy{})
	wf.StartNodes = []workflow.StartNode{{Name: "web", Source: "http", EntryNode: "done"}}
	wf.Nodes = []workflow.Node{{ID: "done", Type: "terminate"}}
	wf.HTTPRoutes = []workflow.HTTPRoute{{Method: "GET", Path: "/hello", StartNode: "web"}}
	data, _ := json.Marshal(childSpec{Workflow: wf, Args: []string{"--bind", addr(port), "serve"}})
	spec := filepath.Join(t.TempDir(), "spec.json")
	writeFile(t, spec, string(data))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=cli", childSpecEnv+"="+spec)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	get := func(path string) string {
		var err error
		for range 200 { // up to 10 s for the child to listen
			var resp *http.Response
			if resp, err = http.Get("http://" + addr(port) + path); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return string(body)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("GET %s: %v\n%s", path, err, stderr.String())
		return ""
	}
	var doc struct{ Sandbox *confine.Report }
	if body := get("/.well-known/kiln"); json.Unmarshal([]byte(body), &doc) != nil || doc.Sandbox == nil ||
		!doc.Sandbox.Confined || doc.Sandbox.ABI != abi {
		t.Errorf("discovery sandbox = %+v\n%s", doc.Sandbox, body)
	}
	metrics := get("/metrics")
	for _, want := range []string{`kiln_sandbox_confined{workflow="serve"} 1`, `kiln_sandbox_landlock_abi{workflow="serve"} ` + strconv.Itoa(abi)} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if body := get("/hello"); !strings.Contains(body, "completed") && !strings.Contains(body, "{") {
		t.Errorf("GET /hello = %q", body)
	}
}

// TestMCPStdioConfined: the MCP reference server (node, over stdio) runs
// inside the domain, with its module tree in fs.read, and answers a tool
// call; a server whose files the policy does not list cannot start.
func TestMCPStdioConfined(t *testing.T) {
	requireLandlock(t)
	node := testtool.Command(t, "node")
	tree := filepath.Join(testtool.RepoRoot(t), ".cache", "npm")
	script := filepath.Join(tree, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		testtool.Missing(t, "interop with @modelcontextprotocol/server-everything: %s is not installed (run `make tools`)", script)
	}
	wf := &workflow.Workflow{
		Name:       "mcp",
		StartNodes: []workflow.StartNode{{Name: "main", Source: "manual", EntryNode: "echo"}},
		Nodes:      []workflow.Node{{ID: "echo", Type: "call_mcp_tool", Tool: "echo", ArgsFrom: "trigger.args"}},
		MCPServers: []workflow.MCPServer{{Name: "everything", Command: []string{node, script, "stdio"}, AllowTools: []string{"echo"}}},
		Policy: &workflow.Policy{MCP: &workflow.MCPPolicy{Tools: []string{"echo"}},
			FS: &workflow.FSPolicy{Read: []string{tree + "/**"}}},
	}
	input := filepath.Join(t.TempDir(), "input.json")
	writeFile(t, input, `{"args":{"message":"hello from the domain"}}`)
	run := runChild(t, "cli", childSpec{Workflow: wf, Args: []string{"--input", input, "--log-level", "info"}})
	if run.Code != 0 || !strings.Contains(run.Stdout, "hello from the domain") || !strings.Contains(run.Stderr, "sandbox.applied") {
		t.Errorf("confined MCP stdio server: exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
	}

	wf.Policy.FS = nil // the server's own files are now outside the policy
	run = runChild(t, "cli", childSpec{Workflow: wf, Args: []string{"--input", input}})
	if run.Code == 0 || strings.Contains(run.Stdout, "hello from the domain") {
		t.Errorf("a server whose files are outside the policy answered: exit %d\n%s", run.Code, run.Stdout)
	}
}

// TestCLIFilesConfined: what the CLI itself writes after confinement
// (--record, --record-dir, --state-dir, a --log-target file) still works,
// and the audit log file tells what was applied.
func TestCLIFilesConfined(t *testing.T) {
	requireLandlock(t)
	l := newLayout(t)
	input := filepath.Join(t.TempDir(), "input.json")
	writeFile(t, input, `{"args":["`+l.in+`/file"]}`)
	// Directories that do not exist yet: created at start-up, granted
	// exactly.
	record := filepath.Join(t.TempDir(), "records", "run.json")
	tapes, state, logs := t.TempDir()+"/tapes", t.TempDir()+"/state", t.TempDir()
	run := runChild(t, "cli", childSpec{Workflow: catWorkflow(l, "/bin/cat"), Args: []string{"--input", input,
		"--record", record, "--record-dir", tapes, "--state-dir", state, "--log-target", "file:" + logs + "/audit.log", "--log-level", "info"}})
	if run.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", run.Code, run.Stdout, run.Stderr)
	}
	if data, err := os.ReadFile(record); err != nil || !strings.Contains(string(data), "inside") {
		t.Errorf("--record: %.200q, %v", data, err)
	}
	if entries, err := os.ReadDir(tapes); err != nil || len(entries) != 1 {
		t.Errorf("--record-dir holds %d entries (%v), want one tape", len(entries), err)
	}
	if data, err := os.ReadFile(logs + "/audit.log"); err != nil || !strings.Contains(string(data), "sandbox.applied") || !strings.Contains(string(data), "workflow.completed") {
		t.Errorf("audit log: %q, %v", data, err)
	}
}
