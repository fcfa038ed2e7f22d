// Package spec declares the rego family's workflow-level table,
// [policy.rego]: a Rego policy that every tool decision the static
// allowlists allow must also satisfy (docs/policy.md). It holds data and
// the shape check only, so the generator links it without OPA; the Rego
// itself is compiled and checked by capabilities/rego/compile.
package spec

import (
	"regexp"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the rego family's declaration.
var Family = spec.Family{
	ID:    "rego",
	Check: Check,
}

// Package is the package every policy must declare (package agent).
const Package = "agent"

// DefaultQuery is the decision evaluated when query is not set.
const DefaultQuery = "data.agent.allow"

// InlineName names an inline policy in messages ("inline:3: ...").
const InlineName = "inline"

// Table names the block in messages.
const Table = "[policy.rego]"

// queryRe is a reference into data: data.agent.allow, data.agent.tools.ok.
var queryRe = regexp.MustCompile(`^data(\.[A-Za-z_][A-Za-z0-9_]*)+$`)

// Check validates the shape of [policy.rego]: exactly one of file and
// inline, a query that is a reference into data, data keys that do not
// shadow the policy's package, and the file read with the workflow.
func Check(wf *workflow.Workflow, ctx spec.Context) []spec.Issue {
	if wf.Policy == nil || wf.Policy.Rego == nil {
		return nil
	}
	r := wf.Policy.Rego
	var is spec.Issues
	switch {
	case r.File != "" && r.Inline != "":
		is.Add("field_conflict", "%s: set file or inline, not both", Table)
	case r.File == "" && r.Inline == "":
		is.Add("missing_field", "%s: file or inline is required", Table)
	case r.File != "":
		for _, fi := range fileIssues(ctx, r.File) {
			is.Add(fi.Code, "%s: %s", Table, fi.Message)
		}
	}
	if r.Query != "" && !queryRe.MatchString(r.Query) {
		is.Add("invalid_rego_query", "%s: query %q must be a reference into data, such as %s", Table, r.Query, DefaultQuery)
	}
	for k := range r.Data {
		switch k {
		case "":
			is.Add("invalid_rego_data", "%s: data has an empty key", Table)
		case Package:
			is.Add("invalid_rego_data", "%s: data key %q would collide with the policy's package %s", Table, k, Package)
		}
	}
	return is
}

func fileIssues(ctx spec.Context, path string) []spec.Issue {
	_, issues := ctx.File("file", path)
	return issues
}

// Query returns the decision r evaluates.
func Query(r *workflow.RegoPolicy) string {
	if r.Query == "" {
		return DefaultQuery
	}
	return r.Query
}
