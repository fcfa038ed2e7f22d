package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

func secretNeed(key string, optional bool) needs.Need {
	return needs.Need{ID: "secret:" + key, Kind: needs.KindSecret, Key: key, Optional: optional, Sources: []string{"workflow:w"}}
}

func runBuild(t *testing.T, wf *workflow.Workflow, b *Build, env map[string]string, args ...string) (result, *needs.Report) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, Options{Prog: "agent", Workflow: wf, Stdout: &out, Stderr: &errb, Build: b,
		Env: func(k string) string { return env[k] }})
	r := result{code, out.String(), errb.String()}
	text := r.stdout
	if text == "" {
		text = r.stderr
	}
	var rep needs.Report
	if i := strings.Index(text, "{"); i >= 0 {
		_ = json.NewDecoder(strings.NewReader(text[i:])).Decode(&rep)
	}
	return r, &rep
}

func itemStatus(r *needs.Report, id string) string {
	for _, it := range r.Needs {
		if it.ID == id {
			return it.Status
		}
	}
	return "absent"
}

// TestPreflightSecretSources: a secret need is met by the environment or
// by a [[secrets]] entry of that name whose source resolves; nothing runs
// a command or prints a value.
func TestPreflightSecretSources(t *testing.T) {
	dir := t.TempDir()
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	wf.Source = filepath.Join(dir, "workflow.toml")
	exe := filepath.Join(dir, "fetch-secret")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho never-run >"+filepath.Join(dir, "ran")+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wf.Secrets = []workflow.Secret{
		{Name: "FROM_ENV", Source: "env", Var: "REAL_VAR"},
		{Name: "FROM_FILE", Source: "file", Path: "secret.txt"}, // relative to the workflow
		{Name: "FROM_CMD", Source: "command", Argv: []string{exe}},
		{Name: "FROM_MISSING_CMD", Source: "command", Argv: []string{filepath.Join(dir, "nope")}},
		{Name: "FROM_OAUTH", Source: "oauth2", TokenURL: "https://login.example.com/t", ClientIDEnv: "CID", ClientSecretEnv: "CSECRET"},
	}
	eff := &needs.Effective{Workflow: "w", Needs: []needs.Need{
		secretNeed("PLAIN", false), secretNeed("FROM_ENV", false), secretNeed("FROM_FILE", false),
		secretNeed("FROM_CMD", false), secretNeed("FROM_MISSING_CMD", false), secretNeed("FROM_OAUTH", false),
	}}
	b := &Build{Needs: eff}

	_, rep := runBuild(t, wf, b, nil, "needs")
	for _, id := range []string{"secret:PLAIN", "secret:FROM_ENV", "secret:FROM_FILE", "secret:FROM_MISSING_CMD", "secret:FROM_OAUTH"} {
		if s := itemStatus(rep, id); s != needs.Missing {
			t.Errorf("nothing provided: %s is %s", id, s)
		}
	}
	if s := itemStatus(rep, "secret:FROM_CMD"); s != needs.Satisfied {
		t.Errorf("an executable command source: %s", s)
	}

	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("file-value-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PLAIN": "plain-value-1", "REAL_VAR": "env-value-1", "CID": "id", "CSECRET": "oauth-value-1"}
	r, rep := runBuild(t, wf, b, env, "needs")
	if r.code != ExitBlocked || itemStatus(rep, "secret:FROM_MISSING_CMD") != needs.Missing {
		t.Fatalf("a command that does not exist: exit %d\n%s", r.code, r.stdout)
	}
	for _, id := range []string{"secret:PLAIN", "secret:FROM_ENV", "secret:FROM_FILE", "secret:FROM_CMD", "secret:FROM_OAUTH"} {
		if s := itemStatus(rep, id); s != needs.Satisfied {
			t.Errorf("provided: %s is %s", id, s)
		}
	}
	for _, v := range []string{"plain-value-1", "env-value-1", "file-value-1", "oauth-value-1"} {
		if strings.Contains(r.stdout+r.stderr, v) {
			t.Fatalf("value %q printed", v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("preflight ran a secret command")
	}
}

// TestPreflightExitCodesAndModes: `needs` exits 6 only when blocked;
// a blocked run prints the report on stderr and exits 6, or runs with
// --preflight=warn; a bad --preflight value is a usage error.
func TestPreflightExitCodesAndModes(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"})
	b := &Build{Needs: &needs.Effective{Workflow: "w", Needs: []needs.Need{secretNeed("TOKEN", false), secretNeed("EXTRA", true)}}}

	if r, rep := runBuild(t, wf, b, nil, "needs"); r.code != ExitBlocked || rep.Status != needs.Blocked {
		t.Fatalf("blocked needs: exit %d %s", r.code, r.stdout)
	}
	r, rep := runBuild(t, wf, b, nil, "--log-level", "off")
	if r.code != ExitBlocked || rep.Status != needs.Blocked || r.stdout != "" || !strings.Contains(r.stderr, "refusing to start") {
		t.Fatalf("blocked run: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if r, _ := runBuild(t, wf, b, nil, "--preflight", "warn", "--log-level", "off"); r.code != ExitOK || !strings.Contains(r.stdout, `"completed"`) {
		t.Fatalf("warn: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r, _ := runBuild(t, wf, b, map[string]string{"KILN_PREFLIGHT": "maybe"}); r.code != ExitUsage || !strings.Contains(r.stderr, "enforce or warn") {
		t.Fatalf("bad mode: exit %d %s", r.code, r.stderr)
	}
	env := map[string]string{"TOKEN": "t"}
	if r, rep := runBuild(t, wf, b, env, "needs"); r.code != ExitOK || rep.Status != needs.Degraded {
		t.Fatalf("optional missing: exit %d %s", r.code, r.stdout)
	}
	if r, _ := runBuild(t, wf, b, env, "--log-level", "off"); r.code != ExitOK {
		t.Fatalf("degraded run: exit %d %s", r.code, r.stderr)
	}
	// No Build (a caller without needs): nothing to check.
	if r := run(t, wf, nil, "", "needs"); r.code != ExitOK || !strings.Contains(r.stdout, `"ready"`) {
		t.Fatalf("no build: exit %d %s", r.code, r.stdout)
	}
}

// TestDegradedBuildDispatch: the node kinds a degraded build lacks compile
// (no load error) and fail at dispatch with capability_not_provided; the
// degraded keys show in the report as unsupported, without blocking.
func TestDegradedBuildDispatch(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"}, workflow.Node{ID: "fetch", Type: "http_request"})
	b := &Build{Needs: &needs.Effective{Workflow: "w"}, Degraded: []string{"tools.http"}, Unprovided: []string{"http_request"}}
	r, rep := runBuild(t, wf, b, nil, "needs")
	if r.code != ExitOK || rep.Status != needs.Degraded || itemStatus(rep, "capability:tools.http") != needs.Unsupported {
		t.Fatalf("needs: exit %d %s", r.code, r.stdout)
	}
	r, _ = runBuild(t, wf, b, nil, "--log-level", "off")
	if r.code != ExitFailed || !strings.Contains(r.stderr, "capability_not_provided") || !strings.Contains(r.stderr, "fetch (http_request)") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without the degraded marking the same workflow does not load.
	r, _ = runBuild(t, wf, &Build{Needs: &needs.Effective{Workflow: "w"}}, nil, "--log-level", "off")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "capability not compiled in") {
		t.Fatalf("undegraded: exit %d\n%s", r.code, r.stderr)
	}
}
