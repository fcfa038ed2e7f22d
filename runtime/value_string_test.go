package runtime

import (
	"bytes"
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
