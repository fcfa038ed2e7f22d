package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// --dry-run explains each node: what it would do and the policy decision;
// a denial is named with its reason and ends the explanation.
func TestDryRunExplains(t *testing.T) {
	wf := simpleWF("w", workflow.Node{ID: "echo", Type: "cli_echo"}, workflow.Node{ID: "write", Type: "cli_action", Event: "deny"})
	r := run(t, wf, nil, "", "--quiet", "--dry-run")
	if r.code != ExitFailed {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, re := range []string{
		`dry run of w: what each node would do`,
		`(?m)^\s+1\s+echo\s+cli_echo\s+cli_echo trigger=\{"kind":"manual"\}\s+allowed$`,
		`(?m)^\s+2\s+write\s+cli_action\s+not run\s+DENIED: fs.write denied on /etc/x: not in the allowlist$`,
		`the run stops at the denial of node write`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Fatalf("stderr lacks %s:\n%s", re, r.stderr)
		}
	}
	// Without --dry-run, no explanation.
	if r := run(t, wf, nil, "", "--quiet"); strings.Contains(r.stderr, "dry run of") {
		t.Fatalf("explained a real run:\n%s", r.stderr)
	}
}
