package runtime

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestAuditRedactAndDropFields: [logging.audit] redact_fields masks the
// named attributes wherever they appear (top level, With, groups), and
// include_reason = false leaves "reason" out; other attributes are kept.
func TestAuditRedactAndDropFields(t *testing.T) {
	var buf bytes.Buffer
	l, closer, err := NewAuditLogger(AuditOptions{Format: "json", Stderr: &buf,
		RedactFields: []string{"target", "password"}, DropFields: []string{"reason"}})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	l.With("password", "hunter2").Warn("policy.denied", "node", "load", "target", "/etc/shadow",
		"reason", "fs.read denied on /etc/shadow", slog.Group("req", "password", "pw", "path", "/x"))
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	req, _ := m["req"].(map[string]any)
	if m["target"] != RedactedMarker || m["password"] != RedactedMarker || req["password"] != RedactedMarker {
		t.Fatalf("named fields not redacted: %s", buf.String())
	}
	if _, ok := m["reason"]; ok {
		t.Fatalf("reason kept although dropped: %s", buf.String())
	}
	if m["node"] != "load" || req["path"] != "/x" || bytes.Contains(buf.Bytes(), []byte("shadow")) {
		t.Fatalf("wrong fields touched: %s", buf.String())
	}
}
