package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// jsonEvents decodes the JSON audit lines in buf.
func jsonEvents(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit line is not JSON: %v: %q", err, line)
		}
		out = append(out, ev)
	}
	return out
}

// node.completed and node.failed report the attempt's time in
// milliseconds, fractions kept.
func TestNodeEventElapsedInMilliseconds(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf, Level: "debug", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Engine: &Engine{Audit: l}, Program: compileT(t, []workflow.Node{out("a", `1`)}, nil), ExecutionID: "e1"}
	n := &workflow.Node{ID: "a", Type: "t_out"}
	r.auditNode(n, 1, 1500*time.Microsecond, Result{Branch: "left"}, nil)
	r.auditNode(n, 2, 2*time.Second, Result{}, errors.New("boom"))
	evs := jsonEvents(t, &buf)
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2:\n%s", len(evs), buf.String())
	}
	if evs[0]["msg"] != "node.completed" || evs[0]["elapsed_ms"] != 1.5 || evs[0]["attempt"] != 1.0 || evs[0]["branch"] != "left" {
		t.Errorf("node.completed %v, want elapsed_ms 1.5 for 1.5 ms", evs[0])
	}
	if evs[1]["msg"] != "node.failed" || evs[1]["elapsed_ms"] != 2000.0 || evs[1]["attempt"] != 2.0 {
		t.Errorf("node.failed %v, want elapsed_ms 2000 for 2 s", evs[1])
	}
}

// A record with nothing to redact and no field rules goes to the
// formatting handler as it is (no copy); field rules, With state or a
// registered secret in it send it through the redaction.
func TestAuditRecordSkipsRedactionOnlyWhenNothingApplies(t *testing.T) {
	// A set of its own: past scanMax registered forms every text counts
	// as possibly holding one.
	isolateSecrets(t)
	RedactValue("audit-skip-secret-7d1e")
	handler := func(o AuditOptions) *redactHandler {
		t.Helper()
		o.Stderr = &bytes.Buffer{}
		l, _, err := NewAuditLogger(o)
		if err != nil {
			t.Fatal(err)
		}
		return l.Handler().(*redactHandler)
	}
	record := func(node string) slog.Record {
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "node.completed", 0)
		r.AddAttrs(slog.String("node", node), slog.Int("attempt", 1))
		return r
	}
	plain := handler(AuditOptions{})
	clean, secret := record("a"), record("audit-skip-secret-7d1e")
	if got := recipient(plain, &clean); got != plain.inner {
		t.Error("a record with nothing to redact is copied through the redaction")
	}
	if got := recipient(plain, &secret); got != slog.Handler(plain) {
		t.Error("a record holding a secret skips the redaction")
	}
	for name, h := range map[string]slog.Handler{
		"redact_fields": handler(AuditOptions{RedactFields: []string{"node"}}),
		"drop_fields":   handler(AuditOptions{DropFields: []string{"reason"}}),
		"With":          plain.WithAttrs([]slog.Attr{slog.String("replica", "r1")}),
		"WithGroup":     plain.WithGroup("g"),
	} {
		if got := recipient(h, &clean); got != h {
			t.Errorf("%s: the record skips the rules that apply to it", name)
		}
	}
}

// TestAuditWithoutSecretsSkipsRedaction: while no secret is registered,
// redaction is the identity, so every record (errors and structured
// values included) goes straight to the sink, and its line is the one
// the redacting path writes.
func TestAuditWithoutSecretsSkipsRedaction(t *testing.T) {
	isolateSecrets(t)
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		l, _, err := NewAuditLogger(AuditOptions{Format: format, Stderr: &buf})
		if err != nil {
			t.Fatal(err)
		}
		h := l.Handler().(*redactHandler)
		r := slog.NewRecord(time.Date(2026, 11, 28, 1, 2, 3, 0, time.UTC), slog.LevelWarn, "node.failed", 0)
		r.AddAttrs(slog.String("node", "a b"), slog.Any("error", errors.New("boom \"x\"")),
			slog.Any("detail", map[string]any{"k": []any{1, "v"}}), slog.Group("g", slog.String("s", "t")))
		if got := recipient(h, &r); got != h.inner {
			t.Fatalf("%s: with no secret registered the record is copied through the redaction", format)
		}
		if err := h.inner.Handle(context.Background(), r.Clone()); err != nil {
			t.Fatal(err)
		}
		direct := buf.String()
		buf.Reset()
		if err := h.Handle(context.Background(), r.Clone()); err != nil {
			t.Fatal(err)
		}
		// The redacting path, forced: the same line.
		redacted := slog.NewRecord(r.Time, r.Level, r.Message, 0)
		r.Attrs(func(a slog.Attr) bool { redacted.AddAttrs(redactAttr(a)); return true })
		buf.Reset()
		if err := h.inner.Handle(context.Background(), redacted); err != nil {
			t.Fatal(err)
		}
		if buf.String() != direct {
			t.Errorf("%s: direct line\n%s differs from the redacted one\n%s", format, direct, buf.String())
		}
	}
}

// failing is a sink or closer that fails with its own error.
type failing struct{ err error }

func (f failing) Write([]byte) (int, error) { return 0, f.err }
func (f failing) Close() error              { return f.err }

// closeCount counts its Close calls.
type closeCount struct{ n *int }

func (c closeCount) Close() error { *c.n++; return nil }

// One audit sink that fails (a full disk) does not keep the line from
// the others, and the first failure is the one reported.
func TestTeeWriterWritesEverySinkAndReportsTheFirstFailure(t *testing.T) {
	errA, errB := errors.New("sink a failed"), errors.New("sink b failed")
	var before, after bytes.Buffer
	tee := teeWriter{&before, failing{errA}, &after, failing{errB}}
	n, err := tee.Write([]byte("line\n"))
	if n != 5 || err != errA {
		t.Errorf("Write = %d, %v; want 5, %v", n, err, errA)
	}
	if before.String() != "line\n" || after.String() != "line\n" {
		t.Errorf("the working sinks got %q and %q, want the line in both", before.String(), after.String())
	}
	if n, err := (teeWriter{&before, &after}).Write([]byte("x")); n != 1 || err != nil {
		t.Errorf("Write to working sinks = %d, %v", n, err)
	}
}

// Closing the audit sinks closes every one, and reports the first failure.
func TestClosersCloseEveryOneAndReportTheFirstFailure(t *testing.T) {
	errA, errB := errors.New("close a failed"), errors.New("close b failed")
	var n int
	err := closers{closeCount{&n}, failing{errA}, closeCount{&n}, failing{errB}}.Close()
	if err != errA || n != 2 {
		t.Errorf("Close = %v with %d working closers closed; want %v and 2", err, n, errA)
	}
	if err := (closers{closeCount{&n}}).Close(); err != nil || n != 3 {
		t.Errorf("Close of a working closer = %v (%d closed)", err, n)
	}
}

// A structured attribute holding a secret is written as its redacted JSON;
// one JSON cannot encode (a func field) is redacted through its printed
// form instead of slipping through.
func TestAuditStructuredAttributesRedacted(t *testing.T) {
	const secret = "audit-any-secret-5c2b"
	RedactValue(secret)
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	type unencodable struct {
		Token string
		Hook  func()
	}
	l.Info("ev", "args", map[string]any{"token": secret}, "odd", unencodable{Token: secret, Hook: func() {}})
	line := buf.String()
	if strings.Contains(line, secret) {
		t.Fatalf("audit line leaks the secret: %s", line)
	}
	if !strings.Contains(line, `args="{\"token\":\"[REDACTED]\"}"`) {
		t.Errorf("structured attribute not written as redacted JSON: %s", line)
	}
	if !strings.Contains(line, `odd="{[REDACTED] `) {
		t.Errorf("unencodable attribute not written as redacted text: %s", line)
	}
}
