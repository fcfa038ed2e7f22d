package gen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/gen/internal/tomlkeys"
	"github.com/kilnworks/kiln/runtime/nesting"
)

// corpusFiles lists every workflow-shaped TOML file under testdata, the
// engine's and the families' fixtures and examples: the fuzz seed corpus.
func corpusFiles(t testing.TB) []string {
	var files []string
	for _, root := range []string{"../testdata", "../runtime/testdata", "../capabilities", "../examples"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(p, ".toml") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// FuzzLoadValidate feeds arbitrary bytes through the whole loader — strict
// decode, key index, child and asset loading from an in-memory file set,
// validation — and requires that nothing panics and that every failure is
// one of the loader's two error types.
func FuzzLoadValidate(f *testing.F) {
	for _, p := range corpusFiles(f) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	tricky, err := os.ReadFile("internal/tomlkeys/testdata/tricky.toml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tricky)
	schema := []byte(`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		// The root, any child named child.toml (the same bytes: a cycle or
		// a nested copy) and a schema exist; everything else is missing.
		read := func(p string) ([]byte, error) {
			switch filepath.Base(p) {
			case "fuzz.toml", "child.toml":
				return data, nil
			case "schema.json":
				return schema, nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		}
		wf, err := load("fuzz.toml", LoadOptions{}, read)
		var pe *ParseError
		var ve *ValidationError
		switch {
		case err == nil:
			if wf == nil || wf.Digest == "" {
				t.Fatal("nil workflow or digest without an error")
			}
		case errors.As(err, &pe):
			if pe.File == "" || pe.Msg == "" {
				t.Fatalf("parse error without file or message: %#v", pe)
			}

		case errors.As(err, &ve):
			if len(ve.Issues) == 0 {
				t.Fatal("validation error without issues")
			}
		}
		// Every key and array element of an accepted document is in the
		// key index, so errors can always name a line. (Like the loader,
		// decode only what passes the nesting check.)
		var raw map[string]any
		if nesting.TOML(data) == nil {
			if _, err := toml.Decode(string(data), &raw); err == nil {
				ix := tomlkeys.Scan(string(data))
				walkPaths(raw, "", func(p string) {
					if at, ok := ix.Find(p); !ok || at.Line < 1 {
						t.Fatalf("key index misses %s", p)
					}
				})
			}
		}

		// Decode + Validate alone (no files).
		w2, err := Decode("fuzz.toml", data)
		if err == nil {
			_ = Validate(w2)
			return
		}
		var dpe *ParseError
		if !errors.As(err, &dpe) {
			t.Fatalf("Decode: unexpected error type %T", err)
		}
		// A key-level problem is always located: the key index must find
		// every key of a document BurntSushi/toml accepted.
		if dpe.Key != "" && dpe.Line == 0 {
			t.Fatalf("no line for %s: %s", dpe.Key, dpe.Msg)
		}
	})
}

// walkPaths calls f with the path of every key and array element in v.
func walkPaths(v any, path string, f func(string)) {
	if path != "" {
		f(path)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			walkPaths(sub, tomlkeys.JoinKey(path, k), f)
		}
	default:
		if items, ok := asList(v); ok {
			for i, it := range items {
				walkPaths(it, tomlkeys.JoinIndex(path, i), f)
			}
		}
	}
}
