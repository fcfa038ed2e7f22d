package gen

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestParseErrors loads every testdata/parse file; each starts with
// "# want LINE KEY: MESSAGE" (KEY "-" for none) naming the exact line, key
// and a message fragment of the ParseError it must produce.
func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob("../testdata/parse/*.toml")
	if err != nil || len(files) < 20 {
		t.Fatalf("want at least 20 parse cases, found %d (%v)", len(files), err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			spec, ok := strings.CutPrefix(first, "# want ")
			if !ok {
				t.Fatalf("first line must be '# want LINE KEY: MESSAGE', got %q", first)
			}
			lineStr, rest, _ := strings.Cut(spec, " ")
			key, msg, _ := strings.Cut(rest, ": ")
			wantLine, _ := strconv.Atoi(lineStr)
			if key == "-" {
				key = ""
			}

			_, err = Load(f, LoadOptions{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Load: want *ParseError, got %T %v", err, err)
			}
			if pe.File != f || pe.Line != wantLine || pe.Key != key || !strings.Contains(pe.Msg, msg) {
				t.Errorf("got  %s:%d key %q msg %q\nwant %s:%d key %q msg containing %q",
					pe.File, pe.Line, pe.Key, pe.Msg, f, wantLine, key, msg)
			}
			if want := f + ":" + lineStr + ": "; !strings.HasPrefix(pe.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", pe.Error(), want)
			}
		})
	}
}
