package tomlkeys

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestScanIsLinear: what Scan allocates is bounded by a constant times
// the source, however long or deep the key paths (within the nesting
// limit). A map of full path strings made each of these cost the path
// length times the number of keys: 1,000 keys under a 64-part header of
// 1 KB parts took 70 MB for a 70 KB source.
func TestScanIsLinear(t *testing.T) {
	long := strings.Repeat("k", 1000)
	docs := map[string]func(b *strings.Builder){
		"keys under a long deep header": func(b *strings.Builder) {
			b.WriteString("[" + strings.TrimSuffix(strings.Repeat(long+".", 64), ".") + "]\n")
			for i := range 1000 {
				fmt.Fprintf(b, "a%d = 1\n", i)
			}
		},
		"a long array under a long key": func(b *strings.Builder) {
			b.WriteString("[" + strings.Repeat("k", 100_000) + "]\nx = [")
			b.WriteString(strings.Repeat("1,", 50_000))
			b.WriteString("]\n")
		},
		"arrays 64 deep, many times": func(b *strings.Builder) {
			for i := range 1000 {
				fmt.Fprintf(b, "%s%d = %s1%s\n", long, i, strings.Repeat("[", 64), strings.Repeat("]", 64))
			}
		},
		"inline tables 64 deep, many times": func(b *strings.Builder) {
			for i := range 1000 {
				fmt.Fprintf(b, "%s%d = %s1%s\n", long, i, strings.Repeat("{b=", 64), strings.Repeat("}", 64))
			}
		},
	}
	for name, write := range docs {
		var b strings.Builder
		write(&b)
		src := b.String()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		Scan(src)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %d bytes allocated for %d bytes of source", name, alloc, len(src))
		if limit := uint64(64*len(src) + 1<<20); alloc > limit {
			t.Errorf("%s: %d bytes allocated for %d bytes of source (limit %d)", name, alloc, len(src), limit)
		}
	}
}
