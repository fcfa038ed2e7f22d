package runtime

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDecodeJSONDepth: values 64 levels deep decode, deeper ones are
// refused before encoding/json sees them, quickly and without building
// anything.
func TestDecodeJSONDepth(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"a":[`, n/2) + "1" + strings.Repeat("]}", n/2))
	}
	if _, err := DecodeJSON(nest(64)); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
	if _, err := DecodeJSON(nest(66)); err == nil || err.Error() != "JSON nesting deeper than 64 (at byte 192)" {
		t.Errorf("66 levels: %v", err)
	}
	// Brackets inside strings are text.
	if _, err := DecodeJSON([]byte(`{"a":"` + strings.Repeat("[", 1000) + `\"` + strings.Repeat("{", 1000) + `"}`)); err != nil {
		t.Fatalf("brackets in a string: %v", err)
	}
	for _, bomb := range [][]byte{
		bytes.Repeat([]byte("["), 8<<20),      // encoding/json alone stops at 10,000 levels
		bytes.Repeat([]byte(`{"a":[`), 5_000), // which it reaches in 60 KB
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := DecodeJSON(bomb)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.HasPrefix(err.Error(), "JSON nesting deeper than 64") {
			t.Errorf("%.10s...: %v", bomb, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 || took > time.Second {
			t.Errorf("%.10s...: %d bytes allocated in %v", bomb, alloc, took)
		}
	}
}

// TestDecodeJSONStrayClosingBracket: a value followed by a stray ']' or
// '}' is trailing data, and the next input is decoded on its own (a
// reused decoder once kept the stray byte and failed the next request).
func TestDecodeJSONStrayClosingBracket(t *testing.T) {
	for _, in := range []string{`{}}`, `[1]]`, `1}`, `"s" ]`} {
		if v, err := DecodeJSON([]byte(in)); err == nil || err.Error() != "invalid JSON: trailing data after the value" {
			t.Errorf("DecodeJSON(%q) = %v, %v; want trailing data refused", in, v, err)
		}
		for range 3 {
			if v, err := DecodeJSON([]byte(`[1]`)); err != nil || len(v.([]any)) != 1 {
				t.Fatalf("after %q: DecodeJSON([1]) = %v, %v", in, v, err)
			}
		}
	}
}

// benchBody is the body the HTTP serve benchmark posts on every request.
var benchBody = []byte(`{"event":"ping","n":1}`)

// BenchmarkDecodeJSON is DecodeJSON on the serve hot path's small body.
func BenchmarkDecodeJSON(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeJSON(benchBody); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSONLarge is DecodeJSON on a 1 MB body of shallow
// records, where the depth pre-scan reads every byte once more.
func BenchmarkDecodeJSONLarge(b *testing.B) {
	body := []byte("[" + strings.TrimSuffix(strings.Repeat(`{"name":"a \"quoted\" [name]","tags":["x","y"],"n":12345},`, 16_000), ",") + "]")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
