package spec

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Issue is one validation finding: a stable snake_case code
// (docs/validation-codes.md) and a message.
type Issue struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Issues collects the findings of one check.
type Issues []Issue

// Add records an issue.
func (is *Issues) Add(code, format string, args ...any) {
	*is = append(*is, Issue{Code: code, Message: fmt.Sprintf(format, args...)})
}

// Require records missing_field when a required key is not set.
func (is *Issues) Require(key string, set bool) {
	if !set {
		is.Add("missing_field", "%s is required", key)
	}
}

// Err joins issues into the error a family's Prepare or Setup returns (nil
// when there are none), so a workflow run without the generator fails
// with the generator's messages.
func Err(issues []Issue) error {
	if len(issues) == 0 {
		return nil
	}
	msgs := make([]string, len(issues))
	for i, is := range issues {
		msgs[i] = is.Message
	}
	return errors.New(strings.Join(msgs, "; "))
}

// TriggerErr runs check on every trigger of type typ in wf and returns the
// first failing one as an error naming it the way the generator does:
// triggers[i] (type): message.
func TriggerErr(wf *workflow.Workflow, typ string, check func(*workflow.Trigger, Context) []Issue) error {
	ctx := ForWorkflow(wf)
	for i := range wf.Triggers {
		t := &wf.Triggers[i]
		if t.Type != typ {
			continue
		}
		if err := Err(check(t, ctx)); err != nil {
			return fmt.Errorf("triggers[%d] (%s): %w", i, typ, err)
		}
	}
	return nil
}

// EnvKey records invalid_env_key when key names a variable that is not an
// environment variable name.
func (is *Issues) EnvKey(key, name string) {
	if name != "" && !EnvName(name) {
		is.Add("invalid_env_key", "%s %q is not an environment variable name", key, name)
	}
}

// SecretRef records unknown_secret when key names a secret wf does not
// declare.
func (is *Issues) SecretRef(wf *workflow.Workflow, key, name string) {
	if name != "" && !Secret(wf, name) {
		is.Add("unknown_secret", "%s %q is not declared in [[secrets]]", key, name)
	}
}

// Entry names the i-th entry of a named table in messages (`what "name"`,
// or `table[i]` when it has no name) and reports a missing name or one
// seen before (dupCode).
func (is *Issues) Entry(table, what string, i int, name string, seen map[string]bool, dupCode string) string {
	where := fmt.Sprintf("%s %q", what, name)
	switch {
	case name == "":
		where = fmt.Sprintf("%s[%d]", table, i)
		is.Add("missing_field", "%s: name is required", where)
	case seen[name]:
		is.Add(dupCode, "%s: declared more than once", where)
	}
	seen[name] = true
	return where
}
