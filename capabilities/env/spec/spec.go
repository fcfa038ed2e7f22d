// Package spec declares the env family's node kind, read_env (see
// docs/reference.md). It holds data and checks only, so the generator
// links it without the family.
package spec

import (
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the env family's declaration.
var Family = spec.Family{
	ID: "env",
	Kinds: []spec.Kind{{
		Name: "read_env",
		Doc:  "Reads one environment variable, named literally in the workflow, after the policy's env.read check. Reading is not a side effect, so dry-run reads too.",
		Keys: []spec.Key{{Name: "key", Type: spec.String, Required: true,
			Doc: "the variable name, [A-Za-z_][A-Za-z0-9_]*"}},
		Check:  CheckReadEnv,
		Output: "{key, value}; unset: {key, value: null, missing: true}",
		Policy: "env.read",
	}},
}

// CheckReadEnv checks a read_env node.
func CheckReadEnv(n *workflow.Node, _ spec.Context) []spec.Issue {
	var is spec.Issues
	is.Require("key", n.Key != "")
	if n.Key != "" && !spec.EnvName(n.Key) {
		is.Add("invalid_env_key", "key %q is not an environment variable name", n.Key)
	}
	return is
}
