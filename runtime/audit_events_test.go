package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestRunAuditEventLines pins the per-run audit events of the default
// (text) audit logger byte for byte, apart from time and run id: the
// engine builds these records by hand on every run's path.
func TestRunAuditEventLines(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Audit: l}
	ts := `time=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S* `

	r := runT(t, e, compileT(t, []workflow.Node{out("a", `1`), out("b", `2`)}, []workflow.Edge{wedge("a", "b", "")}),
		RunOptions{})
	wantStatus(t, r, StatusCompleted, "b")
	id := r.ExecutionID
	want := regexp.MustCompile(`^` + ts + `level=INFO msg=workflow.started execution_id=` + id + ` workflow=t start_node="" dry_run=false trigger=manual\n` +
		ts + `level=INFO msg=workflow.completed execution_id=` + id + ` workflow=t status=completed last_node=b elapsed_ms=\d+\n$`)
	if !want.MatchString(buf.String()) {
		t.Fatalf("completed run:\n%s", buf.String())
	}

	buf.Reset()
	fail := workflow.Node{ID: "f", Type: "t_action", Event: "fail", Reason: "order rejected"}
	r = runT(t, e, compileT(t, []workflow.Node{fail}, nil), RunOptions{DryRun: true})
	wantStatus(t, r, StatusFailed, "f")
	want = regexp.MustCompile(`level=WARN msg=workflow.failed execution_id=` + r.ExecutionID +
		` workflow=t status=failed last_node=f elapsed_ms=\d+ reason="order rejected"\n$`)
	if !want.MatchString(buf.String()) || !strings.Contains(buf.String(), "dry_run=true") {
		t.Fatalf("failed run:\n%s", buf.String())
	}

	// A run that never reaches a node logs an empty last_node, as before.
	buf.Reset()
	r = runT(t, e, compileT(t, []workflow.Node{out("a", `1`)}, nil), RunOptions{Start: "nope"})
	wantStatus(t, r, StatusErrored, "")
	if !strings.Contains(buf.String(), `msg=workflow.errored execution_id=`+r.ExecutionID+` workflow=t status=errored last_node="" elapsed_ms=`) {
		t.Fatalf("errored run:\n%s", buf.String())
	}
}

// TestRunAuditLoggerIsTagged: events through Run.Audit carry the run id
// and workflow, ahead of their own attributes.
func TestRunAuditLoggerIsTagged(t *testing.T) {
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	run := &Run{Engine: &Engine{Audit: l}, Program: &Program{Workflow: &workflow.Workflow{Name: "w"}}, ExecutionID: "run-1"}
	run.Audit().Info("agent_loop.tool", "tool", "search")
	if !strings.Contains(buf.String(), "msg=agent_loop.tool execution_id=run-1 workflow=w tool=search\n") {
		t.Fatalf("line: %s", buf.String())
	}
}

// TestAuditRecordWithoutWithIsRedacted covers the handler's no-copy path
// (no With attributes, no field rules): a record is passed on unchanged
// only when redaction would not change it.
func TestAuditRecordWithoutWithIsRedacted(t *testing.T) {
	const secret = "pl41n-path-s3cret"
	var buf bytes.Buffer
	l, _, err := NewAuditLogger(AuditOptions{Stderr: &buf})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("clean", "s", "text", "n", 3, "d", time.Second, "err", errors.New("boom"))
	if !strings.HasSuffix(buf.String(), "msg=clean s=text n=3 d=1s err=boom\n") {
		t.Fatalf("clean record: %s", buf.String())
	}
	RedactValue(secret)
	for i, log := range []func(){
		func() { l.Info("denied " + secret) },
		func() { l.Info("x", "s", "Bearer "+secret) },
		func() { l.Info("x", "err", fmt.Errorf("dial %s: refused", secret)) },
		func() { l.Info("x", "obj", map[string]any{"k": secret}) },
	} {
		buf.Reset()
		log()
		if out := buf.String(); strings.Contains(out, secret) || !strings.Contains(out, RedactedMarker) {
			t.Errorf("record %d: %s", i, out)
		}
	}
}

// TestRedactManySecrets: past the number of secrets checked one by one,
// the replacer alone decides, and still replaces every one of them.
func TestRedactManySecrets(t *testing.T) {
	var all []string
	for i := 0; i < 2*scanMax; i++ {
		s := fmt.Sprintf("zq-many-secret-%02d-x9", i)
		RedactValue(s)
		all = append(all, s)
	}
	text := "a " + strings.Join(all, " b ") + " c"
	got := Redact(text)
	if strings.Contains(got, "zq-many") || strings.Count(got, RedactedMarker) != len(all) {
		t.Fatalf("Redact: %s", got)
	}
	if got := string(RedactBytes([]byte(text))); strings.Contains(got, "zq-many") {
		t.Fatalf("RedactBytes: %s", got)
	}
	if got := Redact("nothing secret here"); got != "nothing secret here" {
		t.Fatalf("clean text changed: %q", got)
	}
}

// TestRedactBytesKeepsCleanInput: text without a secret is returned as it
// is, not copied; text with one comes back redacted.
func TestRedactBytesKeepsCleanInput(t *testing.T) {
	// A set of its own: other tests register more secrets than scanMax.
	old := redactor.Load()
	t.Cleanup(func() { redactor.Store(old) })
	redactor.Store(newRedactSet([]string{"rb-s3cret-value", "other"}))
	clean := []byte(`{"ok":true}`)
	if got := RedactBytes(clean); &got[0] != &clean[0] {
		t.Fatal("clean input was copied")
	}
	dirty := []byte(`{"token":"rb-s3cret-value"}`)
	if got := string(RedactBytes(dirty)); got != `{"token":"[REDACTED]"}` {
		t.Fatalf("got %s", got)
	}
	if string(dirty) != `{"token":"rb-s3cret-value"}` {
		t.Fatal("input modified")
	}
}

// TestLookupSegments: empty segments are keys like any other (the path is
// split on every dot).
func TestLookupSegments(t *testing.T) {
	v := map[string]any{"a": map[string]any{"": "empty-key", "b": map[string]any{"": 1}}, "": "top"}
	for path, want := range map[string]any{"a.": "empty-key", ".": nil, "a..": nil, "a.b.": 1, "a": v["a"]} {
		got, ok := Lookup(v, path)
		if want == nil {
			if ok {
				t.Errorf("Lookup(%q) = %v, want a miss", path, got)
			}
			continue
		}
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Lookup(%q) = %v, %v", path, got, ok)
		}
	}
	if got, ok := Lookup(v, ""); !ok || fmt.Sprint(got) != fmt.Sprint(v) {
		t.Errorf("empty path: %v", got)
	}
}
