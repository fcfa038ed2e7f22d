package httpclient

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// TestRequestAuditedWithHostOnly: an allowed request is audited as
// effect.allowed with the method and scheme://host:port it reached, and
// never with its path or query (a token in a query string must not reach
// the log); a dry run touches nothing and audits no effect.
func TestRequestAuditedWithHostOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p := program(t, wf("get", allow(srv.URL), ""))
	r := run(t, p, map[string]any{"url": srv.URL + "/private/path?token=q-s3cr3t-value"}, runtime.RunOptions{})
	if r.rep.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", r.rep.Outcome)
	}
	var line string
	for _, l := range strings.Split(r.audit, "\n") {
		if strings.Contains(l, "msg=effect.allowed") {
			line = l
		}
	}
	if !strings.Contains(line, `node=req kind=http_request effect=http.request target="GET `+srv.URL+`"`) {
		t.Fatalf("no effect.allowed line with the host:\n%s", r.audit)
	}
	if strings.Contains(r.audit, "q-s3cr3t-value") || strings.Contains(r.audit, "/private/path") {
		t.Fatalf("the audit log holds the URL's path or query:\n%s", r.audit)
	}

	r = run(t, p, map[string]any{"url": srv.URL + "/x"}, runtime.RunOptions{DryRun: true})
	if strings.Contains(r.audit, "effect.allowed") {
		t.Fatalf("a dry run audited an effect:\n%s", r.audit)
	}
}
