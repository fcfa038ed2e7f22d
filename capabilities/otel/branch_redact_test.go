package otel

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestBranchRedactedInSpans: a switch branch is data (here the value of a
// secret), so the node span carries it redacted, while the run itself
// took the branch (redaction is the span's, not the run's).
func TestBranchRedactedInSpans(t *testing.T) {
	const secret = "otel-branch-s3cret-5d2c"
	runtime.RedactValue(secret)
	rec, endpoint := collector(t, ProtocolHTTPJSON)
	wf := decode(t, `
name = "brancher"

[[nodes]]
id = "pick"
type = "switch"
expr = "trigger.state"

[[nodes]]
id = "taken"
type = "terminate"

[[edges]]
from = "pick"
to = "taken"
when = "`+secret+`"

`+otelBlock(endpoint, ProtocolHTTPJSON, ""))
	r := runCLI(t, wf, map[string]any{"state": secret})
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, `"last_node": "taken"`) {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	s := byName(rec.Spans())
	wantAttrs(t, "switch span", s["pick"].Attrs, map[string]string{AttrNodeBranch: runtime.RedactedMarker})
	noLeak(t, rec, secret)
}
