package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuditLoggerRedactsEverywhere(t *testing.T) {
	const secret = "s3cr3t-\"quoted\"-value"
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		l, closer, err := NewAuditLogger(AuditOptions{Format: format, Stderr: &buf})
		if err != nil {
			t.Fatal(err)
		}
		// With attrs captured before the secret is registered are still redacted.
		l = l.With("early", "token="+secret).WithGroup("g")
		RedactValue(secret)
		l.Warn("policy.denied target "+secret,
			"plain", secret,
			"err", errors.New("dial failed with "+secret),
			"obj", map[string]any{"header": "Bearer " + secret},
			slog.Group("nested", "v", secret),
			"count", 3)
		closer.Close()
		out := buf.String()
		if strings.Contains(out, "s3cr3t") {
			t.Fatalf("%s: secret leaked:\n%s", format, out)
		}
		if n := strings.Count(out, RedactedMarker); n < 6 {
			t.Fatalf("%s: only %d redactions:\n%s", format, n, out)
		}
		if format == "json" {
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("json line: %v\n%s", err, out)
			}
			g := m["g"].(map[string]any)
			if g["count"].(float64) != 3 || m["early"] != "token="+RedactedMarker {
				t.Fatalf("structure lost: %v", m)
			}
		}
	}
	if got := Redact("a " + secret + " b"); got != "a [REDACTED] b" {
		t.Fatalf("Redact = %q", got)
	}
	// The JSON-escaped form is covered in encoded output too.
	enc, _ := EncodeJSON(map[string]any{"v": secret})
	if strings.Contains(string(RedactBytes(enc)), "s3cr3t") {
		t.Fatalf("encoded form leaked: %s", RedactBytes(enc))
	}
}

func TestRedactLongestFirst(t *testing.T) {
	RedactValue("abcdef-longer-secret")
	RedactValue("abcdef")
	if got := Redact("x abcdef-longer-secret y abcdef"); got != "x [REDACTED] y [REDACTED]" {
		t.Fatalf("got %q", got)
	}
	RedactValue("") // ignored: would redact everything
	if got := Redact("unrelated"); got != "unrelated" {
		t.Fatalf("got %q", got)
	}
}

func TestAuditLoggerOptions(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Level: "warn", Format: "json", Target: "stdout", Stdout: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("workflow.started")
	l.Warn("node.retry", "attempt", 2)
	if strings.Contains(buf.String(), "workflow.started") || !strings.Contains(buf.String(), `"msg":"node.retry"`) {
		t.Fatalf("level filter: %s", buf.String())
	}

	l, _, err = NewAuditLogger(AuditOptions{Disabled: true, Stderr: &buf})
	if err != nil || l.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("disabled logger must drop everything")
	}
	if l, _, _ := NewAuditLogger(AuditOptions{Level: "off"}); l.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("level off")
	}

	// file target: parents created, appended across loggers.
	path := filepath.Join(t.TempDir(), "logs", "audit.log")
	for i := 0; i < 2; i++ {
		l, c, err := NewAuditLogger(AuditOptions{Target: "file:" + path})
		if err != nil {
			t.Fatal(err)
		}
		l.Info("workflow.completed", "i", i)
		c.Close()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), "workflow.completed") != 2 {
		t.Fatalf("file target: %s", data)
	}

	for _, bad := range []AuditOptions{{Level: "loud"}, {Format: "xml"}, {Target: "syslog"}, {Target: "file:"}} {
		if _, _, err := NewAuditLogger(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if lv, _, err := ParseLogLevel("info,kiln=debug"); err != nil || lv != slog.LevelInfo {
		t.Fatalf("directive: %v %v", lv, err)
	}
	if lv, _, err := ParseLogLevel("TRACE"); err != nil || lv != slog.LevelDebug {
		t.Fatalf("trace: %v %v", lv, err)
	}
}
