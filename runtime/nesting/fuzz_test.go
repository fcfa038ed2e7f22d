package nesting

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedFiles adds every file under the repository's dirs matching ext.
func seedFiles(f *testing.F, ext string, dirs ...string) {
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Ext(p) == ext {
				if data, err := os.ReadFile(p); err == nil {
					f.Add(data)
				}
			}
			return nil
		})
	}
}

// FuzzTOMLNesting: the check never panics or allocates (beyond its
// error), and agrees with the decoder: a document it passes never
// decodes deeper than MaxDepth, and one it refuses for depth, if the
// decoder accepts it, is deeper than MaxDepth. (Only refused documents
// up to 1 KB are decoded: a bigger one could be the bomb the check is
// for.)
func FuzzTOMLNesting(f *testing.F) {
	seedFiles(f, ".toml", "../../testdata/hostile/toml", "../../examples", "../../gen/internal/tomlkeys/testdata")
	for _, s := range []string{
		"a = [[[1]]]", "[a.b.c]\nd.e = {f = [{g = 1}]}", "[[a]]\n[a.b]\nc = [[1]]",
		"a = \"\"\"\n[[[\n\"\"\"\nb = [[2]]", "a = '''[[[''' # [[[\n", "a = \"\\\"[[\" \n",
		"a = {\n  b = [\n    1, # ]\n  ],\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		err := TOML(doc)
		var ne *Error
		if err != nil && (!errors.As(err, &ne) || ne.Line < 1 || ne.Line > bytes.Count(doc, []byte("\n"))+1) {
			t.Fatalf("bad error %v", err)
		}
		if allocs := testing.AllocsPerRun(1, func() { TOML(doc) }); allocs > 1 {
			t.Fatalf("%v allocations", allocs)
		}
		if err != nil && (ne.Msg != deeperMsg || len(doc) > 1024) {
			return
		}
		depth, ok := decodedDepth(string(doc))
		switch {
		case !ok:
		case err == nil && depth > MaxDepth:
			t.Fatalf("passed, but the decoder finds depth %d", depth)
		case err != nil && depth <= MaxDepth:
			t.Fatalf("refused (%v), but the decoder finds depth %d", err, depth)
		}
	})
}

// FuzzJSONDepth: the pre-scan refuses exactly the valid JSON documents
// that encoding/json decodes deeper than MaxDepth, without allocating.
func FuzzJSONDepth(f *testing.F) {
	seedFiles(f, ".json", "../../testdata/hostile/json", "../../testdata/schemas")
	for _, s := range []string{`[[[1]]]`, `{"a":{"b":[1,{"c":"]]"}]}}`, `"\\\"[["`, `[1]]`, `{}}`, `["\\"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := JSON(data)
		if allocs := testing.AllocsPerRun(1, func() { JSON(data) }); allocs > 0 && err == nil {
			t.Fatalf("%v allocations", allocs)
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		if d := jsonDepth(v); (d > MaxDepth) != (err != nil) {
			t.Fatalf("depth %d, pre-scan says %v", d, err)
		}
	})
}
