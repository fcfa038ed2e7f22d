package tomlkeys

import (
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// trickyTOML exercises every construct the index must step over (the
// fuzz test of gen's loader seeds its corpus with it too).
var trickyTOML = func() string {
	data, err := os.ReadFile("testdata/tricky.toml")
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// walkPaths calls f with the path of every key and array element of a
// decoded document.
func walkPaths(v any, path string, f func(string)) {
	if path != "" {
		f(path)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			walkPaths(sub, JoinKey(path, k), f)
		}
	case []map[string]any:
		for i, it := range x {
			walkPaths(it, JoinIndex(path, i), f)
		}
	case []any:
		for i, it := range x {
			walkPaths(it, JoinIndex(path, i), f)
		}
	}
}

func TestKeyIndex(t *testing.T) {
	var raw map[string]any
	if _, err := toml.Decode(trickyTOML, &raw); err != nil {
		t.Fatalf("the sample must be valid TOML: %v", err)
	}
	ix := Scan(trickyTOML)

	// Every key and element is indexed.
	walkPaths(raw, "", func(p string) {
		if _, ok := ix.Find(p); !ok {
			t.Errorf("not indexed: %s", p)
		}
	})

	lineOf := func(substr string) int {
		i := strings.Index(trickyTOML, substr)
		if i < 0 {
			t.Fatalf("sample lacks %q", substr)
		}
		return strings.Count(trickyTOML[:i], "\n") + 1
	}
	want := map[string]int{
		"title":                         lineOf("title ="),
		`"quoted.key"`:                  lineOf(`"quoted.key"`),
		`"literal key"`:                 lineOf(`'literal key'`),
		"escAped":                       lineOf(`"esc`),
		"a.b":                           lineOf("a . b"),
		"dt":                            lineOf("dt ="),
		"ml2":                           lineOf("ml2 ="),
		"lit":                           lineOf("lit ="),
		"nested[1][1][0]":               lineOf("nested ="),
		"inline.p.q":                    lineOf("inline ="),
		"inline.r[1].t":                 lineOf("inline ="),
		"multi[1].u":                    lineOf("{ u = 1 }"),
		"servers[0].env.K":              lineOf(`K = "v"`),
		"servers[1].name":               lineOf(`name = "two"`),
		"servers[1].ports[1].n":         lineOf("n = 2"),
		"servers[1].ports[1].opts":      lineOf("[servers.ports.opts]"),
		"servers[1].ports[1].opts.fast": lineOf("fast = true"),
		"table.after_crlf":              lineOf("after_crlf"),
	}
	for path, line := range want {
		if got, _ := ix.Find(path); got.Line != line {
			t.Errorf("%s: line %d, want %d", path, got.Line, line)
		}
	}
}

// TestKeyIndexNeverHangs: truncated or odd input (which the index never
// sees in practice, because the TOML parser rejects it first) still ends.
func TestKeyIndexNeverHangs(t *testing.T) {
	for i := range len(trickyTOML) {
		Scan(trickyTOML[:i])
	}
	for _, s := range []string{"[", "[[", "a = [", "a = {", `a = """`, "a = '''x", `"a`, "= 1", "a.", "]]]"} {
		Scan(s)
	}
}

func TestFirstLine(t *testing.T) {
	src := "title = 1\n\n[[servers]]\nname = \"one\"\n\n[[servers]]\nname = \"two\"\nbogus = 1\n\n[[servers]]\nbogus = 2\n[\"a[b]\"]\nc = 1\n"
	ix := Scan(src)
	for _, tc := range []struct {
		key  []string
		want int
	}{
		{[]string{"title"}, 1},
		{[]string{"servers"}, 3},
		{[]string{"servers", "name"}, 4},
		{[]string{"servers", "bogus"}, 8}, // the second element's: the first has none
		{[]string{"servers", "nope"}, 3},  // unknown below servers: servers' line
		{[]string{"a[b]", "c"}, 13},       // brackets inside a quoted key are not indices
		{[]string{"missing", "deeper"}, 0},
	} {
		if got := ix.FirstLine(tc.key); got != tc.want {
			t.Errorf("FirstLine(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}
