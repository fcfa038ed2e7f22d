package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// cli_leak fails with a reason that carries the secret named by its key,
// as an error message quoting a credential would.
func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "cli_leak", Family: "clitest", Prepare: func(n *workflow.Node, _ *runtime.Program) (runtime.NodeFunc, error) {
		key := n.Key
		return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
			v, err := c.Run.Services().Secret(key)
			if err != nil {
				return runtime.Result{}, c.Errorf(runtime.ClassConfig, "%v", err)
			}
			return runtime.Result{Action: runtime.Fail, Reason: "upstream refused token " + v}, nil
		}, nil
	}})
}

// TestLoggingAuditSettings: [logging.audit] redact_fields and
// include_reason = false shape the audit log; an audit target naming the
// [logging] target's stream writes each event once; the only setting
// still named in the logging.unsupported warning is [logging.otel] in a
// binary without the otel family.
func TestLoggingAuditSettings(t *testing.T) {
	no := false
	wf := simpleWF("logs", workflow.Node{ID: "deny", Type: "cli_action", Event: "deny"})
	wf.Logging = &workflow.Logging{Format: "json", Rotation: "daily",
		Audit: &workflow.AuditLog{Target: "stderr", RedactFields: []string{"target"}, IncludeReason: &no},
		OTel:  &workflow.OTelLog{Endpoint: "http://127.0.0.1:4318"}}
	r := run(t, wf, nil, "")
	if r.code != ExitFailed {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var denied string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, `"msg":"policy.denied"`) {
			denied = line
		}
	}
	if !strings.Contains(denied, `"target":"[REDACTED]"`) || strings.Contains(denied, `"reason"`) ||
		!strings.Contains(denied, `"node":"deny"`) {
		t.Fatalf("policy.denied event not shaped by [logging.audit]: %q\n%s", denied, r.stderr)
	}
	if n := strings.Count(r.stderr, `"msg":"policy.denied"`); n != 1 {
		t.Fatalf("audit target = [logging] target: policy.denied written %d times\n%s", n, r.stderr)
	}
	if !strings.Contains(r.stderr, `"msg":"logging.unsupported"`) ||
		!strings.Contains(r.stderr, `"ignored":"[logging.otel]"`) {
		t.Fatalf("no warning about ignored settings:\n%s", r.stderr)
	}

	// Nothing to warn about without those settings.
	wf.Logging = &workflow.Logging{Format: "json"}
	if r := run(t, wf, nil, ""); strings.Contains(r.stderr, "logging.unsupported") {
		t.Fatalf("spurious warning:\n%s", r.stderr)
	}
}

// TestUnsupportedLoggingWithOTel: [logging.otel] is only "ignored" when
// the binary does not link the otel family (a build without it, e.g. a
// degraded one); with it the block is acted on. rotation and
// [logging.audit] target are always acted on.
func TestUnsupportedLoggingWithOTel(t *testing.T) {
	lg := &workflow.Logging{Target: "file:a.log", Rotation: "daily", Audit: &workflow.AuditLog{Target: "file:b.log"},
		OTel: &workflow.OTelLog{Endpoint: "http://127.0.0.1:4318"}}
	if got := strings.Join(unsupportedLogging(lg, false), ", "); got != "[logging.otel]" {
		t.Errorf("without otel: %q", got)
	}
	if got := unsupportedLogging(lg, true); got != nil {
		t.Errorf("with otel: %q", got)
	}
}

// auditMsgs reads the JSON audit lines of a file by their "msg".
func auditMsgs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%s: audit line is not JSON: %q", path, line)
		}
		msgs = append(msgs, ev["msg"].(string))
	}
	return msgs
}

// TestAuditTargetSink: a run with [logging] target = file:A and
// [logging.audit] target = file:B writes the same events, redacted, to
// both; the same file named twice is written once; --log-target replaces
// [logging] target only; a stream and a file work together.
func TestAuditTargetSink(t *testing.T) {
	const secret = "audit-sink-hunter3"
	env := map[string]string{"KILN_TEST_AUDIT_SINK": secret}
	wf := simpleWF("sinks", workflow.Node{ID: "leak", Type: "cli_leak", Key: "KILN_TEST_AUDIT_SINK"})
	dir := t.TempDir()
	wf.Source = filepath.Join(dir, "workflow.toml") // relative targets are relative to it
	wf.Logging = &workflow.Logging{Format: "json", Target: "file:logs/a.log", Audit: &workflow.AuditLog{Target: "file:audit/b.log"}}
	r := run(t, wf, env, "")
	if r.code != ExitFailed || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	a, b := filepath.Join(dir, "logs", "a.log"), filepath.Join(dir, "audit", "b.log")
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if got := strings.Join(auditMsgs(t, a), ","); got != "policy.allow_all,workflow.started,workflow.failed" {
		t.Fatalf("events in %s: %s", a, got)
	}
	if string(da) != string(db) {
		t.Fatalf("sinks differ:\n%s\n--\n%s", da, db)
	}
	for name, text := range map[string]string{"a.log": string(da), "b.log": string(db), "stdout": r.stdout} {
		if strings.Contains(text, secret) || !strings.Contains(text, "upstream refused token "+runtime.RedactedMarker) {
			t.Fatalf("%s not redacted:\n%s", name, text)
		}
	}

	// The same file, spelled differently: each event once.
	wf.Logging.Audit.Target = "file:" + filepath.Join(dir, "audit", "..", "logs", "a.log")
	run(t, wf, env, "")
	if got := strings.Join(auditMsgs(t, a), ","); got != "policy.allow_all,workflow.started,workflow.failed,policy.allow_all,workflow.started,workflow.failed" {
		t.Fatalf("same file twice: %s", got)
	}

	// --log-target replaces [logging] target; the audit sink stays.
	c := filepath.Join(t.TempDir(), "c.log")
	os.Remove(b)
	wf.Logging.Audit.Target = "file:audit/b.log"
	r = run(t, wf, env, "", "--log-target", "file:"+c)
	if got := strings.Join(auditMsgs(t, c), ","); got != "policy.allow_all,workflow.started,workflow.failed" || r.stderr != "" {
		t.Fatalf("--log-target file: %s (stderr %q)", got, r.stderr)
	}
	if got := strings.Join(auditMsgs(t, b), ","); got != "policy.allow_all,workflow.started,workflow.failed" {
		t.Fatalf("audit sink with --log-target: %s", got)
	}

	// stdout and a file.
	os.Remove(b)
	wf.Logging.Target = "stdout"
	r = run(t, wf, env, "")
	var onStdout []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, `{"time"`) {
			onStdout = append(onStdout, line)
		}
	}
	db, _ = os.ReadFile(b)
	if len(onStdout) != 3 || strings.Join(onStdout, "\n")+"\n" != string(db) || r.stderr != "" {
		t.Fatalf("stdout audit lines %q, file %q, stderr %q", onStdout, db, r.stderr)
	}
}

// TestLoggingRotation: [logging] rotation names the active file after its
// period (UTC) and applies to the dedicated audit file too.
func TestLoggingRotation(t *testing.T) {
	dir := t.TempDir()
	wf := simpleWF("rotate", workflow.Node{ID: "echo", Type: "cli_echo"})
	wf.Logging = &workflow.Logging{Format: "json", Rotation: "hourly",
		Target: "file:" + filepath.Join(dir, "main.log"), Audit: &workflow.AuditLog{Target: "file:" + filepath.Join(dir, "audit.log")}}
	if r := run(t, wf, nil, ""); r.code != ExitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// One file each, or two when the run straddled an hour.
	name := regexp.MustCompile(`^(main|audit)\.log\.\d{4}-\d{2}-\d{2}-\d{2}$`)
	var events int
	for _, e := range entries {
		if !name.MatchString(e.Name()) {
			t.Fatalf("unexpected file %s", e.Name())
		}
		events += len(auditMsgs(t, filepath.Join(dir, e.Name())))
	}
	if len(entries) < 2 || events != 6 {
		t.Fatalf("%d files, %d events", len(entries), events)
	}
}
