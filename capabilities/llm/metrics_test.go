package llm_test

import (
	"bytes"
	"testing"

	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/internal/ops/opstest"
	"github.com/kilnworks/kiln/capabilities/llm/mock"
	"github.com/kilnworks/kiln/runtime"
)

// TestRequestMetricsByBackend: with the process metrics attached (serve
// mode), an intelligence request is timed and its reported tokens counted
// under its backend, by type.
func TestRequestMetricsByBackend(t *testing.T) {
	_, sock := startMock(t, &mock.Script{Turns: []mock.Turn{turn("positive", 12, 1)}})
	p := compile(t, classify, nil)
	e, _ := engineFor(t, p, sock)
	set := metrics.Attach(&runtime.Host{Engine: e, Program: p, ServeMode: true})
	wantStatus(t, runOnce(t, e, p, map[string]any{"text": "fine", "user": "ada"}), runtime.StatusCompleted)
	var b bytes.Buffer
	if err := set.Write(&b); err != nil {
		t.Fatal(err)
	}
	m, _ := opstest.Parse(t, b.String())
	for k, want := range map[string]float64{
		`kiln_llm_request_duration_seconds_count{backend="default",workflow="classify"}`: 1,
		`kiln_llm_tokens_total{backend="default",type="prompt",workflow="classify"}`:     12,
		`kiln_llm_tokens_total{backend="default",type="completion",workflow="classify"}`: 1,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v\n%s", k, got, ok, want, b.String())
		}
	}
}
