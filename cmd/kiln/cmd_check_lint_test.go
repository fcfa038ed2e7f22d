package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

const lintedWorkflow = `name = "linted"

[[start_nodes]]
name = "main"
source = "manual"

[[nodes]]
id = "check"
type = "condition"
expr = "trigger.go"

[[nodes]]
id = "yes"
type = "terminate"

[[edges]]
from = "check"
to = "yes"
when = "true"
`

// TestCheckWarnings: a condition without a false edge is valid (exit 0)
// with a warning in JSON and in text; --strict makes it an issue (exit 5).
func TestCheckWarnings(t *testing.T) {
	path := writeFile(t, t.TempDir(), "workflow.toml", lintedWorkflow)

	code, stdout, stderr := runKiln(t, "check", path)
	var rep struct {
		OK       bool `json:"ok"`
		Issues   []struct{ Code, Message string }
		Warnings []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != cli.ExitOK || !rep.OK || len(rep.Issues) != 0 {
		t.Fatalf("exit %d stdout %q stderr %q (%v)", code, stdout, stderr, err)
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Code != "condition_branch_unhandled" || !strings.Contains(rep.Warnings[0].Message, `"false"`) {
		t.Errorf("warnings %+v", rep.Warnings)
	}

	code, stdout, _ = runKiln(t, "check", "--format", "text", path)
	if code != cli.ExitOK || !strings.Contains(stdout, ": ok") || !strings.Contains(stdout, "warning condition_branch_unhandled") {
		t.Errorf("text: exit %d stdout %q", code, stdout)
	}

	code, stdout, _ = runKiln(t, "check", "--strict", path)
	rep.Issues, rep.Warnings = nil, nil
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != cli.ExitFailed || rep.OK ||
		len(rep.Issues) != 1 || rep.Issues[0].Code != "condition_branch_unhandled" || len(rep.Warnings) != 0 {
		t.Errorf("--strict: exit %d stdout %q (%v)", code, stdout, err)
	}
}
