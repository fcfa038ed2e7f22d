package gen_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenCases are the workflows under testdata/golden/<name>/input whose
// generated programs are kept in testdata/golden/<name>/want.
var goldenCases = []struct {
	name         string
	skipValidate bool // full sets every field, so it is no valid workflow
}{
	{"hello", false},
	{"full", true},
}

func goldenDir(t testing.TB, name string) string {
	return filepath.Join(repoRoot(t), "testdata", "golden", name)
}

func TestEmitGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			plan := load(t, filepath.Join(goldenDir(t, c.name), "input", "workflow.toml"), c.skipValidate)
			out, err := gen.Emit(plan, gen.EmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(goldenDir(t, c.name), "want")
			if *update {
				if err := os.RemoveAll(want); err != nil {
					t.Fatal(err)
				}
				if err := gen.WriteOutput(want, out); err != nil {
					t.Fatal(err)
				}
			}
			compareTrees(t, out.Files, readTree(t, want))
		})
	}
}

func compareTrees(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for name, data := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: not generated", name)
		} else if !bytes.Equal(g, data) {
			t.Errorf("%s differs from the golden file (go test ./gen -run Golden -update):\n--- got\n%s\n--- want\n%s", name, g, data)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: generated but not in the golden tree", name)
		}
	}
}

// TestEmitDeterministic generates the same workflow tree from two
// different places into two different directories: the trees must be
// identical and mention neither place.
func TestEmitDeterministic(t *testing.T) {
	input := filepath.Join(goldenDir(t, "full"), "input")
	a, b := t.TempDir(), filepath.Join(t.TempDir(), "deeper", "still")
	copyTree(t, input, a)
	copyTree(t, input, b)
	var trees []map[string][]byte
	for _, dir := range []string{a, b} {
		plan := load(t, filepath.Join(dir, "workflow.toml"), true)
		out, err := gen.Emit(plan, gen.EmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(t.TempDir(), "out")
		if err := gen.WriteOutput(dst, out); err != nil {
			t.Fatal(err)
		}
		tree := readTree(t, dst)
		for name, data := range tree {
			if bytes.Contains(data, []byte(dir)) || bytes.Contains(data, []byte(dst)) {
				t.Errorf("%s mentions a directory of this machine", name)
			}
		}
		trees = append(trees, tree)
	}
	if !reflect.DeepEqual(trees[0], trees[1]) {
		t.Error("generating the same workflow from two places gave different trees")
	}
	if len(trees[0]) < 8 {
		t.Errorf("only %d files generated", len(trees[0]))
	}
}

// TestWriteOutputRemovesStaleEmbeds regenerates into a directory that
// holds an embed file the workflow no longer declares: it must go, since
// the folder's go:embed directive would otherwise still ship it.
func TestWriteOutputRemovesStaleEmbeds(t *testing.T) {
	plan := load(t, filepath.Join(goldenDir(t, "hello"), "input", "workflow.toml"), false)
	out, err := gen.Emit(plan, gen.EmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "embed", "assets", "0000-old.json")
	writeFile(t, stale, []byte("{}"))
	mine := filepath.Join(dir, "notes.txt") // outside embed/: not the generator's
	writeFile(t, mine, []byte("keep"))
	if err := gen.WriteOutput(dir, out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale embed file kept: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file outside embed/ was removed: %v", err)
	}
}

func TestEmitPackageName(t *testing.T) {
	plan := load(t, filepath.Join(goldenDir(t, "hello"), "input", "workflow.toml"), false)
	out, err := gen.Emit(plan, gen.EmitOptions{Package: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	mainGo := string(out.Files[gen.FileMain])
	if !strings.Contains(mainGo, "package agent") || !strings.Contains(mainGo, "func Main()") || strings.Contains(mainGo, "func main()") {
		t.Errorf("non-main package:\n%s", mainGo)
	}
	for _, bad := range []string{"1x", "a-b", "_", ""} {
		if bad == "" {
			continue
		}
		if _, err := gen.Emit(plan, gen.EmitOptions{Package: bad}); err == nil {
			t.Errorf("package %q accepted", bad)
		}
	}
}

// TestEmitRefusesChangedSource: the generator embeds the exact bytes the
// digest was computed from; a file changed after loading is refused.
func TestEmitRefusesChangedSource(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join(goldenDir(t, "hello"), "input"), dir)
	plan := load(t, filepath.Join(dir, "workflow.toml"), false)
	writeFile(t, filepath.Join(dir, "workflow.toml"), []byte("name = \"changed\"\n"))
	if _, err := gen.Emit(plan, gen.EmitOptions{}); err == nil || !strings.Contains(err.Error(), "changed while kiln was reading it") {
		t.Errorf("changed source: %v", err)
	}
}

// TestFullFixtureSetsEveryField makes sure testdata/golden/full really
// sets every field of the workflow model somewhere, so the round trip
// below covers them all. A field added to the model must be added there.
func TestFullFixtureSetsEveryField(t *testing.T) {
	plan := load(t, filepath.Join(goldenDir(t, "full"), "input", "workflow.toml"), true)
	set := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if !v.Field(i).IsZero() {
					set[v.Type().Name()+"."+v.Type().Field(i).Name] = true
				}
				walk(v.Field(i))
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				walk(v.MapIndex(k))
			}
		}
	}
	walk(reflect.ValueOf(plan.Workflow))
	// Fields the fixture cannot set: Source is never emitted, and the
	// signing loader refuses required=true without a signature and both key
	// sources at once.
	exempt := map[string]bool{"Workflow.Source": true, "Signing.Required": true, "Signing.PublicKeyFile": true}
	var missing []string
	var visit func(t reflect.Type)
	seen := map[reflect.Type]bool{}
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			name := t.Name() + "." + t.Field(i).Name
			if !set[name] && !exempt[name] {
				missing = append(missing, name)
			}
			visit(t.Field(i).Type)
		}
	}
	visit(reflect.TypeFor[workflow.Workflow]())
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("testdata/golden/full/input never sets %v: add them so the generator round trip covers them", missing)
	}
}

// TestEmittedProgramRoundTrips type-checks the generated package of the
// full fixture with go/packages, then builds and runs a program that
// prints the compiled-in workflow as JSON: it must equal the loaded one,
// field for field, children and assets included.
func TestEmittedProgramRoundTrips(t *testing.T) {
	plan := load(t, filepath.Join(goldenDir(t, "full"), "input", "workflow.toml"), true)
	modDir, _ := genModule(t, plan, "wf")
	writeFile(t, filepath.Join(modDir, "main.go"), []byte(`package main

import (
	"encoding/json"
	"os"

	"kiln.local/test/wf/wf"
)

func main() {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(wf.Workflow); err != nil {
		panic(err)
	}
}
`))
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo,
		Dir:  modDir,
		Env:  append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off"),
	}
	pkgs, err := packages.Load(cfg, "./wf")
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 || len(pkgs) != 1 {
		t.Fatalf("generated package does not type-check (%d errors)", n)
	}
	if obj := pkgs[0].Types.Scope().Lookup("Workflow"); obj == nil || obj.Type().String() != "*github.com/kilnworks/kiln/runtime/workflow.Workflow" {
		t.Fatalf("Workflow is %v", obj)
	}

	got := goRun(t, modDir, nil, "run", ".")
	want, err := json.MarshalIndent(withoutSources(plan.Workflow), "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != string(want) {
		t.Errorf("compiled-in workflow differs from the loaded one\n--- compiled in\n%s\n--- loaded\n%s", got, want)
	}
	if !strings.Contains(got, `"Children": {`) || !strings.Contains(got, `"Assets": {`) {
		t.Error("round trip did not cover children and assets")
	}
	// The embedded manifest is the plan's.
	m, _ := manifest.Encode(plan.Manifest)
	if !bytes.Contains(readTree(t, modDir)["wf/manifest.json"], m) {
		t.Error("manifest.json differs from the plan's manifest")
	}
}

// withoutSources copies a workflow tree with Source cleared (a compiled-in
// workflow has no file).
func withoutSources(wf *workflow.Workflow) *workflow.Workflow {
	c := *wf
	c.Source = ""
	if wf.Children != nil {
		c.Children = map[string]*workflow.Workflow{}
		for k, ch := range wf.Children {
			c.Children[k] = withoutSources(ch)
		}
	}
	return &c
}
