package draft

import (
	"math"
	"testing"
)

// The size model against sealed builds measured with `kiln build` on
// linux/amd64 (go1.26): the single-family points it was fitted on are
// exact, and combinations it was not fitted on land within 5%.
func TestEstimateSizeAgainstMeasuredBuilds(t *testing.T) {
	for _, m := range []struct {
		families []string
		bytes    int64
	}{
		{[]string{"control"}, 3_068_030},
		{[]string{"control", "data"}, 3_092_606},
		{[]string{"control", "httpclient"}, 7_086_206},
		{[]string{"control", "mcp"}, 8_900_734},
		{[]string{"control", "http"}, 7_868_542},
		{[]string{"control", "fs", "llm"}, 7_540_862},
		// Not fitted on:
		{[]string{"control", "data", "fs", "env"}, 3_125_374},                                 // examples/hello
		{[]string{"control", "data", "env", "httpclient", "cron", "secrets"}, 7_327_870},      // examples/cron-poller
		{[]string{"control", "data", "http"}, 7_876_734},                                      // examples/webhook
		{[]string{"control", "data", "fs", "mcp", "secrets"}, 9_031_806},                      // examples/mcp-reconcile
		{[]string{"control", "data", "fs", "env", "shell", "compose", "interval"}, 3_625_086}, // examples/nightly-report
	} {
		est := EstimateSize(m.families)
		off := math.Abs(float64(est.Bytes-m.bytes)) / float64(m.bytes)
		if off > 0.05 {
			t.Errorf("%v: estimated %d, measured %d (%.1f%% off)", m.families, est.Bytes, m.bytes, 100*off)
		}
	}
	est := EstimateSize([]string{"control", "interval"})
	if len(est.Unmeasured) != 1 || est.Unmeasured[0] != "interval" {
		t.Fatalf("an unmeasured family must be named: %+v", est)
	}
}
