package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/runtime/cli"
)

var updateNeedsGolden = flag.Bool("update-needs", false, "rewrite testdata/needs/*.golden.json")

func runInProcess(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestNeedsGolden(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := filepath.Join(root, "examples", "classifier", "workflow.toml")
	code, out, errOut := runInProcess("needs", wf, "--needs", filepath.Join(root, "testdata", "needs", "extra.toml"))
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden := filepath.Join(root, "testdata", "needs", "classifier.golden.json")
	if *updateNeedsGolden {
		os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("kiln needs output differs from %s:\n%s", golden, out)
	}
	for _, s := range []string{`"secret:SLACK_TOKEN"`, `"oauth:google:gmail.readonly"`, `"workflow:classifier"`, `"intelligence:anthropic"`} {
		if !strings.Contains(out, s) {
			t.Errorf("missing %s", s)
		}
	}
	if strings.Contains(out, "unused.example.com") {
		t.Error("a class the workflow does not use contributed needs")
	}
	// Deterministic across runs.
	_, again, _ := runInProcess("needs", "--needs", filepath.Join(root, "testdata", "needs", "extra.toml"), wf)
	if again != out {
		t.Error("output not deterministic")
	}
}

func TestNeedsErrors(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := filepath.Join(root, "examples", "classifier", "workflow.toml")
	if code, _, e := runInProcess("needs", wf, "--needs", filepath.Join(root, "testdata", "needs", "conflict.toml")); code != cli.ExitFailed || !strings.Contains(e, "/srv/data") {
		t.Errorf("conflict: exit %d %q", code, e)
	}
	if code, _, e := runInProcess("needs", wf, "--needs", "/nonexistent/catalog.toml"); code != cli.ExitUsage || !strings.Contains(e, "catalog") {
		t.Errorf("missing catalog: exit %d %q", code, e)
	}
	if code, _, _ := runInProcess("needs"); code != cli.ExitUsage {
		t.Errorf("no args: exit %d", code)
	}
	if code, _, e := runInProcess("needs", "/nonexistent/wf.toml"); code != cli.ExitUsage || !strings.Contains(e, "wf.toml") {
		t.Errorf("missing workflow: exit %d %q", code, e)
	}
}

// preWorkflow writes a workflow that writes one file under dir/out, and a
// catalog asking a mandatory and an optional secret for it.
func preWorkflow(t *testing.T, extra string) (wf, catalog, out string) {
	t.Helper()
	dir := t.TempDir()
	out = filepath.Join(dir, "out")
	wf = writeWorkflow(t, dir, `
name = "pre"
[[nodes]]
id = "save"
type = "write_file"
path_from = "trigger.path"
content_from = "trigger.text"
[policy.fs]
write = ["`+out+`/**"]
`+extra)
	catalog = filepath.Join(dir, "team-needs.toml")
	if err := os.WriteFile(catalog, []byte(`
[[agent_needs]]
class_name = "workflow:pre"
[agent_needs.needs]
secrets = [{ key = "H9_PRE_TOKEN", label = "API token" }, { key = "H9_PRE_OPTIONAL", label = "nice to have", optional = true }]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return wf, catalog, out
}

type preflightReport struct {
	Status string `json:"status"`
	Needs  []struct {
		ID     string   `json:"id"`
		Kind   string   `json:"kind"`
		Label  string   `json:"label"`
		Source []string `json:"source"`
		Status string   `json:"status"`
		Action *struct {
			Type      string `json:"type"`
			SecretKey string `json:"secret_key"`
			Path      string `json:"path"`
			Mode      string `json:"mode"`
		} `json:"action"`
	} `json:"needs"`
}

func parseReport(t *testing.T, text string) preflightReport {
	t.Helper()
	var r preflightReport
	start := strings.Index(text, "{")
	if start < 0 {
		t.Fatalf("no report in %q", text)
	}
	if err := json.NewDecoder(strings.NewReader(text[start:])).Decode(&r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, text)
	}
	return r
}

func (r preflightReport) status(id string) string {
	for _, n := range r.Needs {
		if n.ID == id {
			return n.Status
		}
	}
	return "absent"
}

// TestRunPreflight runs the real kiln binary: `kiln run WF needs` reports
// each need, and a run refuses to start (exit 6, the report on stderr)
// until the mandatory secret is provided, unless --preflight=warn.
// Approvals files narrow what the compiled policy approves.
func TestRunPreflight(t *testing.T) {
	wf, cat, out := preWorkflow(t, "")
	input := filepath.Join(t.TempDir(), "in.json")
	target := filepath.Join(out, "x.txt")
	if err := os.WriteFile(input, []byte(`{"path":"`+target+`","text":"hi"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "tok-value-7731"

	r := kiln(t, nil, "", "run", wf, "--needs", cat, "needs")
	rep := parseReport(t, r.stdout)
	if r.code != cli.ExitBlocked || rep.Status != "blocked" || rep.status("secret:H9_PRE_TOKEN") != "missing" {
		t.Fatalf("needs without env: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, n := range rep.Needs {
		if n.ID == "secret:H9_PRE_TOKEN" && (n.Action == nil || n.Action.Type != "provide_secret" || n.Action.SecretKey != "H9_PRE_TOKEN" ||
			n.Label != "API token" || len(n.Source) != 1 || n.Source[0] != "workflow:pre") {
			t.Errorf("secret item %+v", n)
		}
	}
	if s := rep.status("filesystem:" + out + ":rw"); s != "satisfied" {
		t.Errorf("policy path: %s (the compiled policy approves it without --approvals)", s)
	}

	r = kiln(t, nil, "", "run", wf, "--needs", cat, "--input", input)
	if r.code != cli.ExitBlocked || !strings.Contains(r.stderr, `"status": "blocked"`) || !strings.Contains(r.stderr, "refusing to start") || r.stdout != "" {
		t.Fatalf("run without env: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a blocked run wrote its file")
	}
	// Without the catalog nothing asks for the token.
	if r := kiln(t, nil, "", "run", wf, "--input", input, "--quiet"); r.code != cli.ExitOK {
		t.Fatalf("run without the catalog: exit %d\n%s", r.code, r.stderr)
	}
	os.Remove(target)

	r = kiln(t, []string{"KILN_PREFLIGHT=warn"}, "", "run", wf, "--needs", cat, "--input", input, "--log-format", "json")
	if r.code != cli.ExitOK || !strings.Contains(r.stderr, `"msg":"preflight.blocked"`) {
		t.Fatalf("--preflight=warn: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("warn mode did not run: %v", err)
	}

	env := []string{"H9_PRE_TOKEN=" + token}
	r = kiln(t, env, "", "run", wf, "--needs", cat, "needs")
	rep = parseReport(t, r.stdout)
	if r.code != cli.ExitOK || rep.Status != "degraded" || rep.status("secret:H9_PRE_TOKEN") != "satisfied" || rep.status("secret:H9_PRE_OPTIONAL") != "missing" {
		t.Fatalf("needs with the token: exit %d\n%s", r.code, r.stdout)
	}
	r = kiln(t, env, "", "run", wf, "--needs", cat, "--input", input, "--log-level", "debug")
	if r.code != cli.ExitOK || strings.Contains(r.stdout+r.stderr, token) {
		t.Fatalf("run with the token: exit %d (or the value leaked)\n%s%s", r.code, r.stdout, r.stderr)
	}
	env = append(env, "H9_PRE_OPTIONAL=x")
	if r := kiln(t, env, "", "run", wf, "--needs", cat, "needs"); r.code != cli.ExitOK || parseReport(t, r.stdout).Status != "ready" {
		t.Fatalf("all secrets: exit %d\n%s", r.code, r.stdout)
	}

	// An approvals file replaces the policy's approval and can only narrow.
	approvals := func(body string) string {
		p := filepath.Join(t.TempDir(), "approvals.toml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	none := approvals("network = []\n")
	r = kiln(t, env, "", "run", wf, "--needs", cat, "--approvals", none, "needs")
	rep = parseReport(t, r.stdout)
	if r.code != cli.ExitBlocked || rep.status("filesystem:"+out+":rw") != "approval_required" || rep.status("capability:filesystem") != "approval_required" {
		t.Fatalf("empty approvals: exit %d\n%s", r.code, r.stdout)
	}
	if r := kiln(t, env, "", "run", wf, "--needs", cat, "--approvals", none, "--input", input); r.code != cli.ExitBlocked {
		t.Fatalf("run with empty approvals: exit %d", r.code)
	}
	ro := approvals("capabilities = [\"filesystem\"]\n[[filesystem]]\npath = \"" + out + "\"\nmode = \"ro\"\n")
	if r := kiln(t, env, "", "run", wf, "--needs", cat, "--approvals", ro, "needs"); parseReport(t, r.stdout).status("filesystem:"+out+":rw") != "approval_required" {
		t.Fatalf("a read-only approval covered a read-write need:\n%s", r.stdout)
	}
	rw := approvals("capabilities = [\"filesystem\"]\n[[filesystem]]\npath = \"" + filepath.Dir(out) + "\"\nmode = \"rw\"\n")
	if r := kiln(t, env, "", "run", wf, "--needs", cat, "--approvals", rw, "needs"); r.code != cli.ExitOK || parseReport(t, r.stdout).Status != "ready" {
		t.Fatalf("approved: exit %d\n%s", r.code, r.stdout)
	}
	bad := approvals("[[filesystem]]\npath = \"/x\"\nmode = \"rwx\"\n")
	if r := kiln(t, env, "", "run", wf, "--needs", cat, "--approvals", bad, "needs"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, bad) {
		t.Fatalf("bad approvals: exit %d\n%s", r.code, r.stderr)
	}
}

// TestPreflightSecretFromRegistry: a need is also met by a [[secrets]]
// entry of that name whose source resolves (here a file next to the
// workflow), without printing its value.
func TestPreflightSecretFromRegistry(t *testing.T) {
	wf, cat, _ := preWorkflow(t, `
[[secrets]]
name = "H9_PRE_TOKEN"
source = "file"
path = "token.txt"
`)
	r := kiln(t, nil, "", "run", wf, "--needs", cat, "needs")
	if rep := parseReport(t, r.stdout); r.code != cli.ExitBlocked || rep.status("secret:H9_PRE_TOKEN") != "missing" {
		t.Fatalf("no file yet: exit %d\n%s", r.code, r.stdout)
	}
	const value = "file-secret-5521"
	if err := os.WriteFile(filepath.Join(filepath.Dir(wf), "token.txt"), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = kiln(t, nil, "", "run", wf, "--needs", cat, "needs")
	if rep := parseReport(t, r.stdout); r.code != cli.ExitOK || rep.status("secret:H9_PRE_TOKEN") != "satisfied" || strings.Contains(r.stdout+r.stderr, value) {
		t.Fatalf("file present: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestNeedsFlagOnEveryCommand: check, gen, build and run take --needs; a
// bad catalog is exit 2 naming the file, a conflict exit 5 with the
// conflict.
func TestNeedsFlagOnEveryCommand(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := filepath.Join(root, "examples", "classifier", "workflow.toml")
	conflict := filepath.Join(root, "testdata", "needs", "conflict.toml")
	broken := filepath.Join(t.TempDir(), "broken.toml")
	if err := os.WriteFile(broken, []byte("[[agent_needs]]\nclass_name = \"x\"\nmystery = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, cmd := range [][]string{
		{"check", wf},
		{"gen", wf, "-o", out},
		{"build", wf, "-o", filepath.Join(out, "bin")},
		{"run", wf},
		{"needs", wf},
	} {
		code, _, stderr := runInProcess(append(append([]string{}, cmd...), "--needs", broken)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, broken) || !strings.Contains(stderr, "mystery") {
			t.Errorf("%s with a bad catalog: exit %d, stderr %q", cmd[0], code, stderr)
		}
		code, stdout, stderr := runInProcess(append(append([]string{}, cmd...), "--needs", conflict)...)
		if code != cli.ExitFailed || !strings.Contains(stdout+stderr, "/srv/data") || !strings.Contains(stdout+stderr, "conflict") {
			t.Errorf("%s with conflicting needs: exit %d\nstdout %q\nstderr %q", cmd[0], code, stdout, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("kiln gen wrote output despite the conflict")
	}
}

// TestBuildProfileRefusal: a workflow needing a family the profile
// forbids is refused with unsupported_capability (JSON on stderr, exit 5),
// before anything is compiled.
func TestBuildProfileRefusal(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := writeWorkflow(t, t.TempDir(), degradedHook)
	bin := filepath.Join(t.TempDir(), "bin")
	code, _, stderr := runInProcess("build", wf, "-o", bin, "--profile", filepath.Join(root, "testdata", "profiles", "airgapped.toml"))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details struct {
				RequiredCapability string   `json:"requiredCapability"`
				Families           []string `json:"families"`
				Profile            string   `json:"profile"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(stderr), &env); err != nil {
		t.Fatalf("exit %d, stderr is not the JSON error: %v\n%s", code, err, stderr)
	}
	if code != cli.ExitFailed || env.Error.Code != "unsupported_capability" || env.Error.Details.RequiredCapability != "tools.http" ||
		env.Error.Details.Profile != "airgapped" || len(env.Error.Details.Families) != 1 || env.Error.Details.Families[0] != "httpclient" {
		t.Fatalf("exit %d: %+v", code, env)
	}
	if _, err := os.Stat(bin); err == nil {
		t.Error("a refused build wrote a binary")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--degrade"}, "--degrade needs --profile"},
		{[]string{"--profile", filepath.Join(root, "testdata", "profiles", "missing.toml")}, "missing.toml"},
	} {
		code, _, stderr := runInProcess(append([]string{"build", wf, "-o", bin}, c.args...)...)
		if code != cli.ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}

// degradedHook serves one HMAC route whose only node needs outbound HTTP:
// built for the airgapped profile with --degrade, it serves, reports
// tools.http as degraded, and the node fails with capability_not_provided.
const degradedHook = `
name = "degraded-hook"
requires_capabilities = ["serve.http", "tools.http"]

[[start_nodes]]
name = "hook"
source = "http"

[[http_routes]]
method = "POST"
path = "/hook"
start_node = "hook"
auth = "hmac:gh"

[auth.hmac.gh]
secret_env = "H9_HOOK_SECRET"

[[nodes]]
id = "fetch"
type = "http_request"
method = "GET"
url_from = "trigger.url"

[policy.http]
urls = ["https://api.example.com/**"]
`

// TestSealedBinaryPreflightAndDegradedDiscovery builds degradedHook for
// the airgapped profile with --degrade and runs the sealed binary: it
// refuses to start (exit 6, report on stderr) until the HMAC secret is
// provided, then serves; its discovery and inventory documents, fetched
// over HTTP (kiln's and the OpenWOP ones), match their JSON Schemas and
// list tools.http as degraded, and the node needing it fails with
// capability_not_provided.
func TestSealedBinaryPreflightAndDegradedDiscovery(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	wf := writeWorkflow(t, t.TempDir(), degradedHook)
	bin := filepath.Join(t.TempDir(), "hook")
	code, _, stderr := runInProcess("build", wf, "-o", bin, "--profile", filepath.Join(root, "testdata", "profiles", "airgapped.toml"), "--degrade")
	if code != cli.ExitOK {
		t.Fatalf("kiln build --degrade: exit %d\n%s", code, stderr)
	}
	m, err := os.ReadFile(bin + ".manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Degraded []string `json:"degraded"`
		Needs    string   `json:"effective_needs_sha256"`
	}
	if err := json.Unmarshal(m, &man); err != nil || len(man.Degraded) != 1 || man.Degraded[0] != "tools.http" || len(man.Needs) != 64 {
		t.Fatalf("manifest degraded %v, needs digest %q (%v)", man.Degraded, man.Needs, err)
	}
	if code, out, errOut := runInProcess("inspect", bin); code != cli.ExitOK || !strings.Contains(out, "degraded   tools.http") {
		t.Fatalf("kiln inspect: exit %d\n%s%s", code, out, errOut)
	}
	sealed := func(env []string, args ...string) execResult {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return execResult{code, out.String(), errb.String()}
	}

	// No secret: `needs` says blocked, serving refuses.
	r := sealed(nil, "needs")
	rep := parseReport(t, r.stdout)
	if r.code != cli.ExitBlocked || rep.Status != "blocked" || rep.status("secret:H9_HOOK_SECRET") != "missing" {
		t.Fatalf("needs: exit %d\n%s", r.code, r.stdout)
	}
	r = sealed(nil, "--bind", "127.0.0.1:0")
	if r.code != cli.ExitBlocked || parseReport(t, r.stderr).Status != "blocked" || !strings.Contains(r.stderr, "provide_secret") {
		t.Fatalf("serve without the secret: exit %d\n%s", r.code, r.stderr)
	}

	const secret = "hook-secret-9043"
	env := []string{"H9_HOOK_SECRET=" + secret}
	r = sealed(env, "needs")
	rep = parseReport(t, r.stdout)
	if r.code != cli.ExitOK || rep.Status != "degraded" || rep.status("capability:tools.http") != "unsupported" {
		t.Fatalf("needs with the secret: exit %d\n%s", r.code, r.stdout)
	}
	if r := sealed(env, "verify"); r.code != cli.ExitOK || !strings.Contains(r.stdout, "effective_needs_sha256") {
		t.Fatalf("verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// With the secret it serves.
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
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	addrRE := regexp.MustCompile(`"msg":"http.listening".*?"addr":"([0-9.:]+)"`)
	deadline := time.Now().Add(20 * time.Second)
	for !addrRE.MatchString(logs.String()) {
		select {
		case err := <-exited:
			t.Fatalf("sealed binary exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no http.listening event:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + addrRE.FindStringSubmatch(logs.String())[1]

	for _, c := range []struct{ path, schema string }{
		{"/.well-known/kiln", "discovery.schema.json"},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", c.path, resp.StatusCode, body)
		}
		var doc any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if err := compileSchema(t, filepath.Join(root, "testdata", "schemas", c.schema)).Validate(doc); err != nil {
			t.Fatalf("GET %s does not match %s: %v\n%s", c.path, c.schema, err, body)
		}
		var d struct {
			Degraded     []string       `json:"degraded"`
			Capabilities map[string]any `json:"capabilities"`
		}
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatal(err)
		}
		if _, linked := d.Capabilities["httpclient"]; linked || d.Capabilities["http"] == nil {
			t.Errorf("families advertised: %s", body)
		}
		if len(d.Degraded) != 1 || d.Degraded[0] != "tools.http" {
			t.Errorf("GET %s: degraded %v\n%s", c.path, d.Degraded, body)
		}
	}

	// The node that needs the missing family fails observably.
	payload := `{"url":"https://api.example.com/x"}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(payload))
	req, _ := http.NewRequest("POST", base+"/hook", strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Agent-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(body), "capability_not_provided") || !strings.Contains(string(body), "fetch (http_request)") {
		t.Fatalf("POST /hook: %d %s", resp.StatusCode, body)
	}

	// The OpenWOP documents, against the published schemas (last: the
	// check skips when the schemas are absent outside CI).
	adv, tools := checkOpenWOP(t, base, "local.kiln.degraded-hook", []string{"tools.http"})
	if slices.Contains(adv, "x-host-kiln-tools-http") || len(tools) != 0 {
		t.Errorf("a left-out family is advertised: %v, tools %v", adv, tools)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if strings.Contains(logs.String(), secret) {
		t.Fatal("the secret reached the log")
	}
}

func compileSchema(t *testing.T, path string) *jsonschema.Schema {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, os.ErrNotExist }
	if err := c.AddResource(path, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lockedBuffer is a bytes.Buffer safe for a process writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
