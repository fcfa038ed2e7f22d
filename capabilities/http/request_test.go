package http

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestRequestContract: on a real loopback server a route's run sees the
// query string (first value per name) in trigger.query, only the headers
// the route lists in trigger.headers, and the request id (the caller's
// X-Request-Id, or a generated one when it is missing or unusable, which
// is then the run's execution id too) in trigger.request_id, echoed in
// the reply; a body cannot spoof any of them.
func TestRequestContract(t *testing.T) {
	ts := start(t, wf("echo", `headers = ["X-GitHub-Event", "X-Custom"]`), setup{})
	r := ts.do(t, "POST", "/hook?page=2&page=3&q=a%20b", `{"query":"spoof","headers":{"x-other":"spoof"},"request_id":"spoof"}`,
		"Content-Type", "application/json", "X-GitHub-Event", "push", "X-Other", "not-listed-value",
		"X-Request-Id", "abc-123", "Authorization", "Bearer never-in-a-run").expect(t, 200)
	var out struct {
		FinalValue struct {
			Trigger map[string]any `json:"trigger"`
		} `json:"final_value"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatal(err)
	}
	trig := out.FinalValue.Trigger
	if got, _ := json.Marshal(trig["query"]); string(got) != `{"page":"2","q":"a b"}` {
		t.Errorf("trigger.query = %s", got)
	}
	if got, _ := json.Marshal(trig["headers"]); string(got) != `{"x-github-event":"push"}` {
		t.Errorf("trigger.headers = %s, want only the listed header present", got)
	}
	if trig["request_id"] != "abc-123" || r.header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("request id %v, echoed %q, want abc-123", trig["request_id"], r.header.Get("X-Request-Id"))
	}
	if strings.Contains(r.body, "not-listed-value") || strings.Contains(r.body, "never-in-a-run") {
		t.Errorf("an unlisted header reached the run: %s", r.body)
	}

	// An unusable id is replaced by a generated one, echoed as well.
	r = ts.do(t, "POST", "/hook", `{}`, "Content-Type", "application/json", "X-Request-Id", "bad id;"+strings.Repeat("x", 200)).expect(t, 200)
	id := r.header.Get("X-Request-Id")
	if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(id) || !strings.Contains(r.body, `"request_id":"`+id+`"`) {
		t.Errorf("generated id %q, body %s", id, r.body)
	}
	// A generated id is also the run's execution id; a caller's is not.
	if log := ts.Audit.String(); !strings.Contains(log, `"msg":"workflow.completed","execution_id":"`+id+`"`) ||
		strings.Contains(log, `"execution_id":"abc-123"`) {
		t.Errorf("generated request id %q is not the run's execution id:\n%s", id, log)
	}
	// A query string that does not parse is refused, and still echoed.
	r = ts.do(t, "POST", "/hook?q=%zz", `{}`, "X-Request-Id", "q-1").expect(t, 400)
	if !strings.Contains(r.body, "query string") || r.header.Get("X-Request-Id") != "q-1" {
		t.Errorf("bad query: %s (id %q)", r.body, r.header.Get("X-Request-Id"))
	}
}

// TestRouteHeadersRefused: a route cannot list a credential header, a
// non-token name or a name twice; the server refuses to start.
func TestRouteHeadersRefused(t *testing.T) {
	for list, want := range map[string]string{
		`["Authorization"]`:       "carries credentials",
		`["cookie"]`:              "carries credentials",
		`["Proxy-Authorization"]`: "carries credentials",
		`["X-A", "x-a"]`:          "listed twice",
		`["X A"]`:                 "is not a header name",
	} {
		h := newHost(t, wf("echo", "headers = "+list), setup{})
		if _, err := New(h, Config{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("headers = %s: %v, want %q", list, err, want)
		}
	}
}

// TestRequestContractEmpty: a request without a query string on a route
// that lists no headers still gives its run trigger.query and
// trigger.headers as empty objects (one shared empty map), and a body's
// fields of those names do not replace them.
func TestRequestContractEmpty(t *testing.T) {
	ts := start(t, wf("echo", ""), setup{})
	for range 2 {
		r := ts.do(t, "POST", "/hook", `{"query":{"page":"spoof"},"headers":{"x-a":"spoof"}}`,
			"Content-Type", "application/json", "X-A", "not-listed").expect(t, 200)
		var out struct {
			FinalValue struct {
				Trigger map[string]any `json:"trigger"`
			} `json:"final_value"`
		}
		if err := json.Unmarshal([]byte(r.body), &out); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"query", "headers"} {
			if got, _ := json.Marshal(out.FinalValue.Trigger[k]); string(got) != `{}` {
				t.Errorf("trigger.%s = %s, want {}", k, got)
			}
		}
	}
}
