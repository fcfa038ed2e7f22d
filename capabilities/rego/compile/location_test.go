package compile

import (
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Issues name the file OPA's location names, the policy's own name when
// the location has none, and line 1 for a whole-file location.
func TestIssueLocations(t *testing.T) {
	for _, c := range []struct {
		loc  *ast.Location
		want string
	}{
		{nil, "policy.rego"},
		{&ast.Location{Row: 3}, "policy.rego:3"},
		{&ast.Location{File: "other.rego", Row: 2}, "other.rego:2"},
		{&ast.Location{File: "other.rego"}, "other.rego:1"},
	} {
		if got := at("policy.rego", c.loc); got != c.want {
			t.Errorf("at(policy.rego, %+v) = %q, want %q", c.loc, got, c.want)
		}
	}
}

// Refused calls are reported in source order, whether OPA holds them as
// statements or as terms inside other expressions, on one line or many.
func TestRefusedCallsInSourceOrder(t *testing.T) {
	src := "package agent\n" +
		"allow if {\n" +
		"  x := opa.runtime()\n" + // a term, line 3
		"  http.send({\"method\": \"GET\", \"url\": x.env.URL})\n" + // a statement, line 4
		"  net.lookup_ip_addr(opa.runtime().env.HOST)\n" + // a statement holding a term, line 5
		"}\n"
	r := &workflow.RegoPolicy{File: "policy.rego"}
	issues := check(t, r, map[string][]byte{"policy.rego": []byte(src)})
	var got []string
	for _, is := range issues {
		if is.Code != "rego_builtin_refused" {
			t.Fatalf("issue %v, want only refused built-ins", is)
		}
		msg := is.Message[strings.Index(is.Message, "policy.rego:"):]
		got = append(got, msg[:strings.Index(msg, " is refused")])
	}
	want := []string{"policy.rego:3: opa.runtime", "policy.rego:4: http.send", "policy.rego:5: net.lookup_ip_addr", "policy.rego:5: opa.runtime"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("refused calls\n got %q\nwant %q", got, want)
	}
}
