package compile

import (
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
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
