package parsejson

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// decodeCorpus: documents on which parse_json's decoder and
// runtime.DecodeJSON must agree, valid and invalid.
var decodeCorpus = []string{
	`{"user":{"name":"Ada","age":36},"plan":"pro","old":{"a":1,"b":[1,2]},"new":{"a":2,"b":[1,2,3]}}`,
	`{"a":1,"a":2}`, `{"a":{"x":1},"a":[2]}`, `{}`, `[]`, `[[]]`, `{"":""}`, `null`, `true`, `false`, `"s"`,
	`-0`, `1e400`, `-1.5E-3`, `123456789012345678901234567890`, `1.0`, `0`,
	"\"\xff\"", "{\"\xff\":1}", "\"a\xc3\"", `"\ud800"`, `"\ud800\u0041"`, `"\udc00"`, `"\ud83d\ude00"`,
	`"\u0000"`, `"\/\b\f\n\r\t\"\\"`, "\"\x01\"", "\"\t\"",
	` [1 , 2 ] `, "\n{\"a\"\t:\r1}\n", `[1,[2,[3,4],[],5],6]`, `{"a":[1,{"b":[2,3]}],"c":[],"d":[[[]]]}`,
	// Invalid, each for its own reason.
	``, `   `, `01`, `1.`, `-`, `+1`, `.5`, `1e`, `[1,]`, `{"a":1,}`, `{"a"}`, `{,}`, `[,1]`, `nul`, `tru`,
	`{1:2}`, `{"a" 1}`, `[1 2]`, `{"a":1 "b":2}`, `"abc`, `[`, `{`, `]`, `}`, `{"a":`, "\ufeff{}", `'a'`,
	`NaN`, `Infinity`, `"\x"`, `"\u12"`,
	// Trailing data.
	`{} {}`, `{}]`, `1 2`, `[]}`, `"a""b"`, `null x`,
	// Nesting at and beyond the bound (refused before decoding, by both).
	strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat("}", 64),
	strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat("}", 65),
	strings.Repeat("[", 100_000),
}

// checkSameDecode: parse_json's decoder gives what runtime.DecodeJSON
// gives: the same value tree (numbers as written, the last of duplicate
// names, invalid UTF-8 and lone surrogates replaced), or an error for the
// same inputs, and the same error for nesting beyond the bound.
func checkSameDecode(t *testing.T, text string) {
	t.Helper()
	want, wantErr := runtime.DecodeJSON([]byte(text))
	got, err := decode(text)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%.80q: parse_json error %v, runtime.DecodeJSON error %v", text, err, wantErr)
	}
	if wantErr != nil && strings.HasPrefix(wantErr.Error(), "JSON nesting deeper") && err.Error() != wantErr.Error() {
		t.Fatalf("%.80q: parse_json error %q, runtime.DecodeJSON error %q", text, err, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%.80q: parse_json gives %#v, runtime.DecodeJSON %#v", text, got, want)
	}
}

func TestDecodeMatchesRuntime(t *testing.T) {
	for _, text := range decodeCorpus {
		checkSameDecode(t, text)
	}
	// A decoder that failed is not reused; one that succeeded is, and
	// keeps nothing of the previous document.
	for range 3 {
		for _, text := range decodeCorpus {
			checkSameDecode(t, text)
		}
	}
}

// TestDecodeRefusesDeepNesting: nesting beyond the bound is refused with
// runtime.DecodeJSON's error, naming the limit and where it was passed,
// however deep the document goes.
func TestDecodeRefusesDeepNesting(t *testing.T) {
	for text, want := range map[string]string{
		strings.Repeat("[", 65) + strings.Repeat("]", 65): "JSON nesting deeper than 64 (at byte 64)",
		strings.Repeat(`{"a":`, 1_000_000):                "JSON nesting deeper than 64 (at byte 320)",
	} {
		if _, err := decode(text); err == nil || err.Error() != want {
			t.Errorf("%.20s...: error %v, want %q", text, err, want)
		}
	}
	if _, err := decode(strings.Repeat("[", 64) + strings.Repeat("]", 64)); err != nil {
		t.Errorf("64 levels: %v", err)
	}
}

func FuzzDecodeMatchesRuntime(f *testing.F) {
	for _, text := range decodeCorpus {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) { checkSameDecode(t, text) })
}

// BenchmarkDecode: parse_json's decoder against runtime.DecodeJSON
// (encoding/json) on the document of the engine's pipeline benchmark; it
// is used only because it is the faster.
func BenchmarkDecode(b *testing.B) {
	doc := decodeCorpus[0]
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.DecodeJSON([]byte(doc)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decode(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDecodePoolKeepsNoValues: a decoder back in the pool holds neither
// the document nor any value of it.
func TestDecodePoolKeepsNoValues(t *testing.T) {
	if _, err := decode(`[1,[2,["x",{"y":[3]}]],4]`); err != nil {
		t.Fatal(err)
	}
	d, _ := decoders.Get().(*decoder)
	if d == nil {
		t.Skip("the pool dropped the decoder")
	}
	if d.text != "" || len(d.items) != 0 || cap(d.items) == 0 {
		t.Fatalf("pooled decoder: text %q, %d items (cap %d)", d.text, len(d.items), cap(d.items))
	}
	for i, v := range d.items[:cap(d.items)] {
		if v != nil {
			t.Fatalf("pooled decoder keeps item %d: %#v", i, v)
		}
	}
}
