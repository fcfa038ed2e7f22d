package http

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestMetricsPassPromtool: the exposition of a serving route, with its
// request, idempotency and process series, passes `promtool check
// metrics` (names, units, HELP, histogram shape).
func TestMetricsPassPromtool(t *testing.T) {
	promtool := testtool.Command(t, "promtool")
	ts := start(t, wf("count", `idempotency_key = "trigger.id"`), setup{})
	ts.do(t, "POST", "/hook", `{"id":"a"}`).expect(t, 200)
	ts.do(t, "POST", "/hook", `{"id":"a"}`).expect(t, 200)
	body := ts.do(t, "GET", "/metrics", "").expect(t, 200).body
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out, body)
	}
	if !strings.Contains(body, `kiln_http_idempotency_replays_total{workflow="hooks",route="POST /hook"} 1`) {
		t.Fatalf("replay not counted:\n%s", body)
	}
}
