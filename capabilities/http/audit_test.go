package http

import (
	"regexp"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// TestRouteAuditLinesWithDefaultLogger: a request on a route, served with
// the audit logger a user gets by default (text, info), writes exactly the
// run's two events, tagged with the run id the reply does not show.
func TestRouteAuditLinesWithDefaultLogger(t *testing.T) {
	h := newHost(t, wf("count", ""), setup{})
	buf := &syncBuffer{}
	audit, _, err := runtime.NewAuditLogger(runtime.AuditOptions{Stderr: buf})
	if err != nil {
		t.Fatal(err)
	}
	h.Engine.Audit = audit
	s, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, s, buf, false)
	r := ts.do(t, "POST", "/hook", `{"id":1}`, "Content-Type", "application/json").expect(t, 200)
	if r.body != `{"status":"completed","final_value":{"count":true},"last_node":"n"}` {
		t.Fatalf("reply %s", r.body)
	}
	ts.Client.CloseIdleConnections()
	if err := ts.stop(t); err != nil {
		t.Fatal(err)
	}
	ts0 := `time=\S+ `
	want := regexp.MustCompile(`(?m)^` + ts0 + `level=INFO msg=workflow.started execution_id=([0-9a-f]{24}) workflow=hooks start_node=main dry_run=false trigger=http principal_kind=anonymous principal_name=anonymous\n` +
		ts0 + `level=INFO msg=workflow.completed execution_id=([0-9a-f]{24}) workflow=hooks status=completed last_node=n elapsed_ms=\d+\n`)
	m := want.FindStringSubmatch(buf.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("audit lines:\n%s", buf.String())
	}
}

// TestServingAuditEnabled: a binary linking the http family formats a
// run's audit lines with the shortcut.
func TestServingAuditEnabled(t *testing.T) {
	if !runtime.ServingAudit() {
		t.Fatal("the http family's init did not enable the serving audit")
	}
}
