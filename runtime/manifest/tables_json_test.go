package manifest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// goldenWorkflows are the workflows the emitter's golden tests compile, by
// name, with whether they load only without validation.
var goldenWorkflows = []struct {
	name, path   string
	skipValidate bool
}{
	{"hello", filepath.Join("..", "..", "testdata", "golden", "hello", "input", "workflow.toml"), false},
	{"allcaps", filepath.Join("..", "..", "testdata", "golden", "allcaps", "workflow.toml"), false},
	{"full", filepath.Join("..", "..", "testdata", "golden", "full", "input", "workflow.toml"), true}, // sets every field
}

// marshalDigest is the digest as tables_sha256 defines it: SHA-256 of
// json.Marshal of the tree with every Source cleared.
func marshalDigest(t *testing.T, wf *workflow.Workflow) string {
	t.Helper()
	for _, w := range workflow.Tree(wf) {
		w.Source = ""
	}
	data, err := json.Marshal(wf)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TablesDigest writes its own JSON for speed; it must stay byte-identical
// to json.Marshal, or every manifest and sealed binary would disagree
// with the generator that wrote them.
func TestTablesDigestIsJSON(t *testing.T) {
	trees := map[string]*workflow.Workflow{
		"zero":        {},
		"every field": filled(t, reflect.TypeFor[workflow.Workflow](), 0).Addr().Interface().(*workflow.Workflow),
	}
	empty := filled(t, reflect.TypeFor[workflow.Workflow](), 0).Addr().Interface().(*workflow.Workflow)
	emptied(reflect.ValueOf(empty).Elem())
	trees["empty slices and maps"] = empty
	for _, g := range goldenWorkflows {
		wf, err := gen.Load(g.path, gen.LoadOptions{SkipValidate: g.skipValidate})
		if err != nil {
			t.Fatal(err)
		}
		trees["golden "+g.name] = wf
	}
	examples, _ := filepath.Glob(filepath.Join("..", "..", "examples", "*", "workflow.toml"))
	if len(examples) == 0 {
		t.Fatal("no examples found")
	}
	for _, path := range examples {
		wf, err := gen.Load(path, gen.LoadOptions{SkipValidate: true})
		if err != nil {
			t.Fatal(err)
		}
		trees[path] = wf
	}
	for name, wf := range trees {
		got, err := manifest.TablesDigest(wf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := marshalDigest(t, wf); got != want {
			t.Errorf("%s: TablesDigest %s, json.Marshal gives %s", name, got, want)
		}
	}
}

// The digest of each golden workflow is the tables_sha256 its golden
// manifest records: the format has not changed.
func TestTablesDigestMatchesGoldenManifests(t *testing.T) {
	for _, g := range goldenWorkflows {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(g.path), "..", "want", "manifest.json"))
		if os.IsNotExist(err) {
			continue // allcaps has no golden tree
		}
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		wf, err := gen.Load(g.path, gen.LoadOptions{SkipValidate: g.skipValidate})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := manifest.TablesDigest(wf); got != m.TablesSHA256 {
			t.Errorf("%s: TablesDigest %s, golden manifest says %s", g.name, got, m.TablesSHA256)
		}
	}
}

// hard are strings json escapes: quotes, backslash, control characters,
// HTML-sensitive bytes, U+2028, non-ASCII and invalid UTF-8.
var hard = []string{"plain", "q\"b\\s\n\t\r\x01\x1f", "<a href='x'>&amp;</a>", "line\u2028sep\u2029", "é ✓ 🙂", "bad\xff\xfeutf8", ""}

// filled returns a value of type t with every field set, recursively: two
// elements per slice and map (keys out of order), hard strings, and
// numbers json formats in different ways. depth bounds the recursion of
// Workflow.Children.
func filled(t *testing.T, typ reflect.Type, depth int) reflect.Value {
	t.Helper()
	v := reflect.New(typ).Elem()
	n := 0
	var fill func(v reflect.Value, depth int)
	fill = func(v reflect.Value, depth int) {
		n++
		switch v.Kind() {
		case reflect.Pointer:
			if v.Type().Elem() == reflect.TypeFor[workflow.Workflow]() && depth >= 2 {
				return // nil: ends the recursion
			}
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), depth+1)
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), depth)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				v.SetBytes([]byte{0, 1, 0xfe, 0xff, byte(n)})
				return
			}
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range 2 {
				fill(v.Index(i), depth)
			}
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			for _, k := range []string{"zeta" + hard[n%len(hard)], "Alpha", "<b>"} {
				e := reflect.New(v.Type().Elem()).Elem()
				fill(e, depth)
				v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
			}
		case reflect.String:
			v.SetString(hard[n%len(hard)])
		case reflect.Bool:
			v.SetBool(n%2 == 0)
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(n) * -1234567)
		case reflect.Float64:
			v.SetFloat([]float64{0.1, 1e21, 1e-7, 3, -2.5e-300}[n%5])
		default:
			t.Fatalf("the filler does not know kind %s (%s): teach it, and check TablesDigest encodes it as json.Marshal does", v.Kind(), v.Type())
		}
	}
	fill(v, depth)
	return v
}

// emptied replaces every slice and map below v with an empty, non-nil one
// (json writes [] and {}, not null).
func emptied(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			emptied(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			emptied(v.Field(i))
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	}
}
