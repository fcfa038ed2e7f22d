package graph_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// TestEmitDocCommentHostile: the generated package doc comment carries the
// workflow's graph; node ids and the workflow name are user input and must
// not end the comment and add code to the sealed program.
func TestEmitDocCommentHostile(t *testing.T) {
	dir := t.TempDir()
	src := `name = "evil\n*/ func init() { panic(1) } /*"

[[start_nodes]]
name = "main"
source = "manual"

[[nodes]]
id = "a\n}\nfunc init() { panic(\"x\") }\n// \u2028 */"
type = "terminate"
`
	path := filepath.Join(dir, "workflow.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	wf, err := gen.Load(path, gen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gen.NewPlan(wf, gen.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := gen.Emit(plan, gen.EmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mainGo := out.Files[gen.FileMain]
	f, err := parser.ParseFile(token.NewFileSet(), gen.FileMain, mainGo, parser.ParseComments)
	if err != nil {
		t.Fatalf("generated main.go does not parse: %v\n%s", err, mainGo)
	}
	var funcs []string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			funcs = append(funcs, fd.Name.Name)
		}
	}
	if len(funcs) != 1 || funcs[0] != "main" {
		t.Errorf("generated main.go declares %v, want only main:\n%s", funcs, mainGo)
	}
	doc := f.Doc.Text()
	for _, want := range []string{"flowchart TD", "a#60;U+000A#62;}#60;U+000A#62;func init() { panic(#34;x#34;) }#60;U+000A#62;// #60;U+2028#62; */<br/>terminate"} {
		if !strings.Contains(doc, want) {
			t.Errorf("package doc lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(string(mainGo), "\u2028") {
		t.Error("a line separator reached the generated source")
	}
}
