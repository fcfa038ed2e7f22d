package runtime

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A child run resolves trigger paths from its kind and input without
// building its trigger map; every answer must be the one the map that
// MakeTrigger builds would give, and Trigger() must be that map.
func TestChildTriggerResolvesAsMakeTrigger(t *testing.T) {
	inputs := []any{
		nil, "text", json.Number("3"), true, []any{"a", map[string]any{"b": "c"}},
		map[string]any{"a": map[string]any{"b": []any{"x", "y"}}, "kind": "spoofed", "input": "own", "": "empty",
			"n": json.Number("1"), "nil": nil},
	}
	paths := []string{"", "kind", "kind.", "kind.x", "input", "input.0", "input.1.b", "input.", "a", "a.b", "a.b.1",
		"a.b.2", "a.", "a..b", ".", "..", "n", "nil", "nil.x", "missing", "missing.x", "0", "input.x"}
	for _, in := range inputs {
		want := MakeTrigger("event", in)
		r := &Run{lazyTrigger: true, triggerKind: "event", triggerInput: in}
		for _, p := range paths {
			gotV, gotOK := r.Resolve("trigger." + p)
			wantV, wantOK := Lookup(want, p)
			if gotOK != wantOK || !reflect.DeepEqual(gotV, wantV) {
				t.Errorf("input %#v: trigger.%s = %#v, %v; want %#v, %v", in, p, gotV, gotOK, wantV, wantOK)
			}
		}
		if v, ok := r.Resolve("trigger"); !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("input %#v: trigger = %#v", in, v)
		}
		if got := r.Trigger(); !reflect.DeepEqual(got, want) {
			t.Errorf("input %#v: Trigger() = %#v, want %#v", in, got, want)
		}
		if r.kind() != "event" {
			t.Errorf("kind %q", r.kind())
		}
	}
}
