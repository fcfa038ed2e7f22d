package runtime

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

// asStringPlain is AsString without its shortcuts and pooled encoder:
// compact JSON from a fresh encoder, or fmt's form when there is none.
func asStringPlain(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(buf.String(), "\n")
}

func TestAsStringMatchesPlainEncoding(t *testing.T) {
	for _, v := range []any{
		nil, true, false, "", "a<b>&", json.Number("1"), json.Number("1.0"), json.Number("-0"),
		json.Number("12345678901234567890123"), json.Number("1e400"), json.Number(""), json.Number("abc"),
		[]any{json.Number("1"), "x", nil}, map[string]any{"b": "<", "a": []any{}}, 3, 2.5, math.Inf(1),
		map[string]any{"bad": json.Number("nope")},
	} {
		if got, want := AsString(v), asStringPlain(v); got != want {
			t.Errorf("AsString(%#v) = %q, want %q", v, got, want)
		}
	}
}

// The pooled encoder hands each caller its own bytes: concurrent renders
// of different values never see each other's output, and a failed encode
// leaves nothing behind for the next one.
func TestEncodeJSONPooledIsolation(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				v := map[string]any{"g": json.Number(fmt.Sprint(g)), "i": json.Number(fmt.Sprint(i)), "pad": strings.Repeat("x", i%70)}
				want := fmt.Sprintf(`{"g":%d,"i":%d,"pad":"%s"}`, g, i, strings.Repeat("x", i%70))
				b, err := EncodeJSON(v)
				if err != nil || string(b) != want {
					t.Errorf("EncodeJSON = %s, %v; want %s", b, err, want)
					return
				}
				if s := AsString(v); s != want {
					t.Errorf("AsString = %s; want %s", s, want)
					return
				}
				if _, err := EncodeJSON(map[string]any{"bad": math.NaN()}); err == nil {
					t.Error("NaN encoded")
					return
				}
			}
		})
	}
	wg.Wait()
	// A value larger than the pool keeps encodes whole, and the next one
	// is not disturbed by it.
	big := strings.Repeat("y", 128<<10)
	if b, err := EncodeJSON(big); err != nil || len(b) != len(big)+2 {
		t.Fatalf("big: %d bytes, %v", len(b), err)
	}
	if b, _ := EncodeJSON("z"); string(b) != `"z"` {
		t.Fatalf("after big: %s", b)
	}
}

// checkAppendValue: appendValue writes what a fresh encoder writes for a
// value tree, and leaves to the encoder only what it cannot take.
func checkAppendValue(t *testing.T, v any, wantFast bool) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	encErr := enc.Encode(v)
	got, ok := appendValue(nil, v, 0)
	if ok != wantFast {
		t.Fatalf("appendValue(%#v) took it: %v, want %v", v, ok, wantFast)
	}
	if ok && (encErr != nil || string(got) != strings.TrimSuffix(buf.String(), "\n")) {
		t.Fatalf("appendValue(%#v) = %q, encoder %q (%v)", v, got, buf.String(), encErr)
	}
}

func TestAppendValueMatchesEncoder(t *testing.T) {
	deep := any("x")
	for range 1001 {
		deep = []any{deep}
	}
	for _, v := range []any{
		nil, true, false, "", "a<b>&'/\x7f", "~ !",
		json.Number("0"), json.Number("-0.5e+10"), json.Number("1E-2"), json.Number(""), json.Number("12345678901234567890123"),
		[]any{}, []any(nil), map[string]any(nil), map[string]any{},
		map[string]any{"b": "<", "a": []any{json.Number("1"), nil, map[string]any{"z": "z", "": true}}, "k": "k"},
		map[string]any{"1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7, "8": 8, "9": "more keys than the buffer"},
	} {
		checkAppendValue(t, Normalize(v), true)
	}
	for _, v := range []any{
		json.Number("01"), json.Number("1."), json.Number("-"), json.Number("1e"), json.Number("+1"), json.Number(".5"),
		json.Number("abc"), json.Number("1e+"), json.Number("NaN"), 3, 2.5, []string{"a"}, map[string]int{},
		[]any{1}, map[string]any{"a": json.Number("x")}, deep,
		// Strings the encoder escapes or checks, as values and as keys.
		"\"", "\\", "\b\f\n\r\t", "\x00", "\x1f", "é", "\u2028", "\xff", []any{"a", "\n"}, map[string]any{"\xff": "k"},
	} {
		checkAppendValue(t, v, false)
	}
}

func FuzzAppendValueMatchesEncoder(f *testing.F) {
	f.Add("a\u2028\xff\"", "1.5e-3", true)
	f.Fuzz(func(t *testing.T, s, number string, b bool) {
		n := json.Number(number)
		_, plain := appendString(nil, s)
		checkAppendValue(t, map[string]any{s: []any{s, b, nil}, "n": n}, plain && validNumber(cmp.Or(number, "0")))
		checkAppendValue(t, s, plain)
	})
}
