package nesting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// tomlDepth is the nesting of a decoded TOML document as TOML counts it:
// each table and array is a level below the root, and an array of tables
// (decoded as []map[string]any) is one level with its tables.
func tomlDepth(v any) int {
	switch x := v.(type) {
	case map[string]any:
		d := 0
		for _, e := range x {
			d = max(d, tomlDepth(e))
		}
		return d + 1
	case []map[string]any:
		d := 1
		for _, e := range x {
			d = max(d, tomlDepth(e))
		}
		return d
	case []any:
		d := 0
		for _, e := range x {
			d = max(d, tomlDepth(e))
		}
		return d + 1
	}
	return 0
}

// decodedDepth decodes doc with the decoder kiln uses and returns its
// depth (the root table not counted), or ok false if it refuses doc.
func decodedDepth(doc string) (depth int, ok bool) {
	var root map[string]any
	if _, err := toml.Decode(doc, &root); err != nil {
		return 0, false
	}
	return tomlDepth(root) - 1, true
}

func nest(open, leaf, closing string, n int) string {
	return strings.Repeat(open, n) + leaf + strings.Repeat(closing, n)
}

func dotted(prefix string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return strings.Join(parts, ".")
}

// TestTOMLDepth: documents at the limit pass, one level more is refused
// at the line where that level opens, and the decoder agrees on depth.
func TestTOMLDepth(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		line int // 0: accepted
	}{
		{"inline tables 64", "a = " + nest("{ b = ", "1", " }", 64) + "\n", 0},
		{"inline tables 65", "a = " + nest("{ b = ", "1", " }", 65) + "\n", 1},
		{"empty inline table at 65", "a = " + nest("{ b = ", "{}", " }", 64) + "\n", 1},
		{"arrays 64", "a = " + nest("[", "1", "]", 64) + "\n", 0},
		{"arrays 65", "x = 1\n\na = " + nest("[", "1", "]", 65) + "\n", 3},
		{"array over lines", "a = [\n" + nest("[\n", "1", "]\n", 63) + "]\n", 0},
		{"65th array on line 65", "a = [\n" + nest("[\n", "1", "]\n", 64) + "]\n", 65},
		{"dotted key of 65 parts: 64 tables", dotted("k", 65) + " = 1\n", 0},
		{"dotted key of 66 parts", "\n" + dotted("k", 66) + " = 1\n", 2},
		{"quoted parts", strings.Repeat(`"x.y".`, 65) + "z = 1\n", 1},
		{"header of 64 parts", "[" + dotted("t", 64) + "]\nx = 1\n", 0},
		{"header of 65 parts", "[" + dotted("t", 65) + "]\n", 1},
		{"array-of-tables header of 64 parts", "[[" + dotted("t", 64) + "]]\nx = 1\n", 0},
		{"array-of-tables header of 65 parts", "[[" + dotted("t", 65) + "]]\n", 1},
		{"header then dotted key then arrays", "[" + dotted("t", 30) + "]\n" + dotted("k", 31) + " = " + nest("[", "1", "]", 4) + "\n", 0},
		{"header then dotted key then arrays, one more", "[" + dotted("t", 30) + "]\n" + dotted("k", 31) + " = " + nest("[", "1", "]", 5) + "\n", 2},
		{"levels reset after a header", "[" + dotted("t", 60) + "]\n[u]\na = " + nest("[", "1", "]", 63) + "\n", 0},
		{"levels reset after a value", "a = " + nest("{ b = ", "1", " }", 64) + "\nc = " + nest("[", "1", "]", 64) + "\n", 0},
		{"inline table keys", "a = { " + dotted("k", 33) + " = " + nest("{ b = ", "1", " }", 31) + " }\n", 0},
		{"inline table keys, one more", "a = { " + dotted("k", 33) + " = " + nest("{ b = ", "1", " }", 32) + " }\n", 1},
		{"inline tables inside arrays", "a = " + nest("[{ b = ", "1", " }]", 32) + "\n", 0},
		{"inline tables inside arrays, one more", "a = [" + nest("[{ b = ", "1", " }]", 32) + "]\n", 1},
		{"siblings do not add up", "a = [" + strings.Repeat(nest("[", "1", "],", 63), 100) + "]\n", 0},
		{"array of tables under a table", "[[a]]\n[a.b]\nc = " + nest("[", "1", "]", 62) + "\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := TOML(tc.doc)
			var ne *Error
			switch {
			case tc.line == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.line != 0 && !errors.As(err, &ne):
				t.Fatalf("accepted, want refusal at line %d (err %v)", tc.line, err)
			case tc.line != 0 && (ne.Line != tc.line || ne.Msg != "nesting deeper than 64"):
				t.Fatalf("got %v, want line %d: nesting deeper than 64", err, tc.line)
			}
			// The decoder measures the same depth: 64 at most when accepted,
			// 65 when refused.
			want := 64
			if tc.line != 0 {
				want = 65
			}
			if d, ok := decodedDepth(tc.doc); !ok || d > want || (tc.line != 0 && d != 65) {
				t.Fatalf("decoder: depth %d ok %v, want %d", d, ok, want)
			}
		})
	}
}

// TestTOMLTextIsNotNesting: brackets in strings of every kind and in
// comments are text; the scan passes over them and still counts what
// follows.
func TestTOMLTextIsNotNesting(t *testing.T) {
	deep := nest("[", "", "]", 1000) + nest("{", "", "}", 1000)
	for _, doc := range []string{
		"a = \"" + deep + "\"\n",
		"a = '" + deep + "'\n",
		"a = \"\"\"\n" + deep + "\n" + deep + "\n\"\"\"\n",
		"a = '''\n" + deep + "\n'''\n",
		"# " + deep + "\na = 1 # " + deep + "\n",
		"a = [ # " + deep + "\n 1, # " + deep + "\n]\n",
		"a = \"escaped \\\" quote " + deep + "\"\n",
		"a = \"escaped backslash \\\\\" # " + deep + "\n",
		"a = \"\"\"\nquote \\\"\"\" still inside " + deep + "\n\"\"\"\n",
		"a = \"\"\"ends with two quotes \"\"\"\"\" # " + deep + "\n",
		"a = '''ends with two quotes ''''' # " + deep + "\n",
		"\"" + deep + "\" = 1\n",
		"'" + deep + "' = 1\n",
		"[\"" + deep + "\"]\nx = 1\n",
		"[t]\n\"" + deep + "\".'" + deep + "' = 1\n",
	} {
		if err := TOML(doc); err != nil {
			t.Errorf("%.60q: %v", doc, err)
		}
		if _, ok := decodedDepth(doc); !ok {
			t.Errorf("%.60q: the sample must be valid TOML", doc)
		}
		// What follows the text is still counted, on the right line.
		bomb := doc + "\n\nz = " + nest("[", "1", "]", 65) + "\n"
		line := strings.Count(doc, "\n") + 3
		var ne *Error
		if err := TOML(bomb); !errors.As(err, &ne) || ne.Line != line {
			t.Errorf("%.60q then a bomb: %v, want a refusal at line %d", doc, err, line)
		}
	}
}

// TestTOMLKeyPaths: below the depth limit, a document whose key paths
// add up past MaxKeyPaths (each key copying a long or deep path) is
// refused too; ordinary documents are far from it.
func TestTOMLKeyPaths(t *testing.T) {
	var long strings.Builder
	long.WriteString("[" + strings.Repeat("k", 100_000) + "]\n")
	for i := range 10_000 {
		fmt.Fprintf(&long, "a%d = 1\n", i)
	}
	var deep strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&deep, "a%d = %s\n", i, nest("{ b = ", "1", " }", 63))
	}
	for name, doc := range map[string]string{"long table name": long.String(), "deep many times": deep.String()} {
		var ne *Error
		if err := TOML(doc); !errors.As(err, &ne) || !strings.HasPrefix(ne.Msg, "keys too many or too deep") {
			t.Errorf("%s: %v, want the key paths refused", name, err)
		}
	}
	// Every TOML file in the repository is far below the limit.
	var files []string
	for _, root := range []string{"../../examples", "../../testdata"} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".toml") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 10 {
		t.Fatalf("found %d TOML files", len(files))
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if cost := keyPathCost(data); cost > MaxKeyPaths/64 {
			t.Errorf("%s: key paths cost %d, within 64 times the limit", p, cost)
		}
	}
}

// keyPathCost is the cost of doc's key paths (up to where it nests too
// deep, for the hostile samples).
func keyPathCost(doc []byte) int {
	cost, _ := scanTOML(doc, math.MaxInt)
	return cost
}

// TestHostileTOML: the bombs are refused quickly and without allocating.
func TestHostileTOML(t *testing.T) {
	for name, doc := range map[string]string{
		"20,000 nested inline tables": "a = " + nest("{ b = ", "1", " }", 20_000),
		"100,000 nested arrays":       "a = " + nest("[", "1", "]", 100_000),
		"header of 20,000 parts":      "[" + dotted("t", 20_000) + "]",
		"dotted key of 20,000 parts":  dotted("k", 20_000) + " = 1",
		"unclosed 1 MB of [":          "a = " + strings.Repeat("[", 1<<20),
		"unclosed 1 MB of {":          "a = " + strings.Repeat("{a=", 1<<20),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := TOML(doc)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		var ne *Error
		if !errors.As(err, &ne) || ne.Msg != "nesting deeper than 64" {
			t.Errorf("%s: %v", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 || took > time.Second {
			t.Errorf("%s: %d bytes allocated, %v", name, alloc, took)
		}
	}
}

// TestJSONDepth: 64 levels pass, 65 are refused; brackets in strings are
// text.
func TestJSONDepth(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		ok   bool
	}{
		{"arrays 64", nest("[", "1", "]", 64), true},
		{"arrays 65", nest("[", "1", "]", 65), false},
		{"objects 64", nest(`{"a":`, "1", "}", 64), true},
		{"objects 65", nest(`{"a":`, "{}", "}", 64), false},
		{"siblings", "[" + strings.Repeat(nest("[", "1", "]", 63)+",", 50) + "1]", true},
		{"strings", `["` + nest("[", "", "]", 100) + `", "\"[[[", "\\", "` + strings.Repeat("{", 100) + `"]`, true},
		{"escaped quote then bomb", `["\"", ` + nest("[", "", "]", 65) + `]`, false},
	} {
		err := JSON([]byte(tc.doc))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "JSON nesting deeper than 64 (at byte ") {
			t.Errorf("%s: message %q", tc.name, err)
		}
		var v any
		if json.Unmarshal([]byte(tc.doc), &v) != nil {
			t.Errorf("%s: the sample must be valid JSON", tc.name)
		}
		if d := jsonDepth(v); (d <= 64) != tc.ok {
			t.Errorf("%s: encoding/json finds depth %d", tc.name, d)
		}
	}
	bomb := bytes.Repeat([]byte("["), 8<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := JSON(bomb)
	runtime.ReadMemStats(&after)
	if err == nil || after.TotalAlloc-before.TotalAlloc > 64<<10 {
		t.Errorf("8 MB of [: %v, %d bytes", err, after.TotalAlloc-before.TotalAlloc)
	}
}

// jsonDepth is how many arrays and objects nest in a decoded JSON value.
func jsonDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	case []any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
		return d + 1
	}
	return 0
}

func BenchmarkJSON(b *testing.B) {
	body := []byte(`{"name":"kiln","n":1}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := JSON(body); err != nil {
			b.Fatal(err)
		}
	}
}
