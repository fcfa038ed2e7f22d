package gen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// corpusFiles lists every workflow-shaped TOML file under testdata and
// examples: the fuzz seed corpus.
func corpusFiles(t testing.TB) []string {
	var files []string
	for _, root := range []string{"../testdata", "../examples"} {
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
		// Decode + Validate alone must agree that the document parses.
		if w2, err := Decode("fuzz.toml", data); err == nil {
			_ = Validate(w2)
		} else if pe == nil && !errors.As(err, new(*ParseError)) {
			t.Fatalf("Decode: unexpected error type %T", err)
		}
	})
}
