package cli

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestLoggingAuditSettings: [logging.audit] redact_fields and
// include_reason = false shape the audit log, and the [logging] settings
// kiln does not act on (rotation, [logging.audit] target, [logging.otel])
// are named in a startup warning instead of being silently ignored.
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
	if !strings.Contains(r.stderr, `"msg":"logging.unsupported"`) ||
		!strings.Contains(r.stderr, `"ignored":"[logging] rotation, [logging.audit] target, [logging.otel]"`) {
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
// degraded one); with it the block is acted on.
func TestUnsupportedLoggingWithOTel(t *testing.T) {
	lg := &workflow.Logging{Rotation: "daily", OTel: &workflow.OTelLog{Endpoint: "http://127.0.0.1:4318"}}
	if got := strings.Join(unsupportedLogging(lg, false), ", "); got != "[logging] rotation, [logging.otel]" {
		t.Errorf("without otel: %q", got)
	}
	if got := strings.Join(unsupportedLogging(lg, true), ", "); got != "[logging] rotation" {
		t.Errorf("with otel: %q", got)
	}
}
