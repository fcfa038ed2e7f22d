package data

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestParseJSONNestingLimit: parse_json decodes a string nested 64 deep
// and refuses one nested deeper, naming the limit, however deep the bomb.
func TestParseJSONNestingLimit(t *testing.T) {
	node := workflow.Node{ID: "body", Type: "parse_json", InputFrom: "trigger.body"}
	payload := func(text string) string { return encode(t, map[string]any{"body": text}) }

	r := runChain(t, payload(strings.Repeat("[", 64)+strings.Repeat("]", 64)), node)
	if r.Outcome.Status != runtime.StatusCompleted {
		t.Fatalf("64 levels: %s %q", r.Outcome.Status, r.Outcome.Reason)
	}
	for text, at := range map[string]string{
		strings.Repeat("[", 65) + strings.Repeat("]", 65): "64",
		strings.Repeat(`{"a":`, 1_000_000):                "320",
	} {
		r := runChain(t, payload(text), node)
		want := `node body (parse_json): input_from "trigger.body" is not valid JSON: JSON nesting deeper than 64 (at byte ` + at + `)`
		if r.Outcome.Status != runtime.StatusErrored || r.Outcome.Reason != want {
			t.Errorf("%.20s...: %s %q", text, r.Outcome.Status, r.Outcome.Reason)
		}
	}
}
