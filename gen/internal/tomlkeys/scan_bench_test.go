package tomlkeys

import (
	"fmt"
	"strings"
	"testing"
)

// scanInputs are documents the loader accepts whose shape made the old
// string-keyed index quadratic: nesting at the depth limit, many times
// over, and many keys under one long table name.
var scanInputs = []struct {
	name string
	src  func() string
}{
	{"inline64x2000", func() string {
		var b strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&b, "a%d = %s1%s\n", i, strings.Repeat("{ b = ", 63), strings.Repeat(" }", 63))
		}
		return b.String()
	}},
	{"array64x2000", func() string {
		var b strings.Builder
		for i := range 2000 {
			fmt.Fprintf(&b, "a%d = %s1%s\n", i, strings.Repeat("[", 64), strings.Repeat("]", 64))
		}
		return b.String()
	}},
	{"longtable10k", func() string {
		var b strings.Builder
		b.WriteString("[" + strings.Repeat("k", 10000) + "]\n")
		for i := range 10000 {
			fmt.Fprintf(&b, "a%d = 1\n", i)
		}
		return b.String()
	}},
	{"wide100k", func() string {
		var b strings.Builder
		for i := range 100000 {
			fmt.Fprintf(&b, "key%d = [1, 2, 3]\n", i)
		}
		return b.String()
	}},
}

func BenchmarkScan(b *testing.B) {
	for _, in := range scanInputs {
		src := in.src()
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				Scan(src)
			}
		})
	}
}
