package gen

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// trickyTOML exercises every construct the key index must step over.
const trickyTOML = `# comment with [[fake]] header and key = "value"
title = "x # not a comment" # a comment
"quoted.key" = 1
'literal key' = 2
"esc\u0041ped" = 3
a . b = 4
dt = 1979-05-27 07:32:00Z
ml = """
line "one" with ]] and }
"""
ml2 = """ends with quotes"""""
lit = '''
raw \ backslash [[x]]
'''
nested = [[1, 2], [3, [4, 5]]]
inline = { p = { q = 1 }, r = [ { s = 1 }, { t = 2 } ] }
multi = [
  # a comment
  "a", # trailing
  { u = 1 },
]

[[servers]]
name = "one"
[servers.env]
K = "v"

[[servers]]
name = "two"

[[servers.ports]]
n = 1

[[servers.ports]]
n = 2
[servers.ports.opts]
fast = true

[table]
crlf = 1` + "\r\n" + `after_crlf = 2
`

func TestKeyIndex(t *testing.T) {
	var raw map[string]any
	if _, err := toml.Decode(trickyTOML, &raw); err != nil {
		t.Fatalf("the sample must be valid TOML: %v", err)
	}
	ix := indexKeys(trickyTOML)

	// Every key and element is indexed.
	walkPaths(raw, "", func(p string) {
		if _, ok := ix[p]; !ok {
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
		if got := ix[path].line; got != line {
			t.Errorf("%s: line %d, want %d", path, got, line)
		}
	}
}

// TestKeyIndexNeverHangs: truncated or odd input (which the index never
// sees in practice, because the TOML parser rejects it first) still ends.
func TestKeyIndexNeverHangs(t *testing.T) {
	for i := range len(trickyTOML) {
		indexKeys(trickyTOML[:i])
	}
	for _, s := range []string{"[", "[[", "a = [", "a = {", `a = """`, "a = '''x", `"a`, "= 1", "a.", "]]]"} {
		indexKeys(s)
	}
}
