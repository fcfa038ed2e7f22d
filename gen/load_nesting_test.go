package gen

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestLoadNestingLimit: a workflow nested 65 deep is refused at the line
// where the 65th level opens; at 64 the decoder runs (and here reports
// the unknown key that holds the nesting); brackets in strings and
// comments are text.
func TestLoadNestingLimit(t *testing.T) {
	const dir = "../testdata/hostile/toml/"
	_, err := Load(dir+"workflow-depth-65.toml", LoadOptions{})
	var pe *ParseError
	if !errors.As(err, &pe) || err.Error() != dir+"workflow-depth-65.toml:70: nesting deeper than 64" {
		t.Fatalf("depth 65: %v", err)
	}
	_, err = Load(dir+"workflow-depth-64.toml", LoadOptions{})
	if !errors.As(err, &pe) || pe.Key != "nodes[0].deep" || pe.Line != 7 || pe.Msg != `unknown key "deep"` {
		t.Fatalf("depth 64: %v", err)
	}
	if _, err := Load(dir+"brackets-in-text.toml", LoadOptions{}); err != nil {
		t.Fatalf("brackets in text: %v", err)
	}
}

// TestDecodeRefusesBombs: documents whose decoding grew with the square
// of their nesting (15 GB for the first) are refused before decoding,
// fast and in little memory.
func TestDecodeRefusesBombs(t *testing.T) {
	var wide, deepMany strings.Builder
	wide.WriteString("[" + strings.Repeat("k", 100_000) + "]\n")
	for i := range 10_000 {
		fmt.Fprintf(&wide, "a%d = 1\n", i)
	}
	for i := range 2000 {
		fmt.Fprintf(&deepMany, "a%d = %s1%s\n", i, strings.Repeat("{b=", 63), strings.Repeat("}", 63))
	}
	for _, tc := range []struct {
		name, doc, msg string
		line           int
	}{
		{"20,000 nested inline tables", "name = \"x\"\na = " + strings.Repeat("{b=", 20_000) + "1" + strings.Repeat("}", 20_000) + "\n", "nesting deeper than 64", 2},
		{"100,000 nested arrays", "name = \"x\"\na = " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n", "nesting deeper than 64", 2},
		{"a header of 20,000 parts", "[" + strings.Repeat("t.", 20_000) + "t]\n", "nesting deeper than 64", 1},
		{"a dotted key of 20,000 parts", strings.Repeat("k.", 20_000) + "k = 1\n", "nesting deeper than 64", 1},
		{"10,000 keys under a 100 KB table name", wide.String(), "keys too many or too deep", 0},
		{"2,000 inline tables 64 deep", deepMany.String(), "keys too many or too deep", 0},
	} {
		data := []byte(tc.doc)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := Decode("bomb.toml", data)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.HasPrefix(pe.Msg, tc.msg) || (tc.line != 0 && pe.Line != tc.line) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 || took > time.Second {
			t.Errorf("%s: %d MiB allocated in %v", tc.name, alloc>>20, took)
		}
	}
}
