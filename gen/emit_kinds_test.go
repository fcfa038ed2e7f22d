package gen

import (
	"go/ast"
	"go/types"
	"os"
	"strconv"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/kilnworks/kiln/capabilities/catalog"
)

// TestKindVars: for every node kind of the catalog, its family package
// declares the runtime.NodeKind variable capabilities_gen.go registers
// (kindVar) in the package the catalog names for it (its family's, or its
// own from KindPackages), and that variable is the handler of exactly that
// kind; every such package has the func RegisterKinds() capabilities/all
// calls and registers nothing from init.
func TestKindVars(t *testing.T) {
	if got := kindVar("read_mcp_resource"); got != "KindReadMCPResource" {
		t.Errorf("kindVar(read_mcp_resource) = %s", got)
	}
	var paths []string
	for _, f := range catalog.Families {
		paths = append(paths, f.KindPackageList()...)
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo,
		Env:  append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off"),
	}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		t.Fatal(err)
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		t.Fatalf("family packages do not type-check (%d errors)", n)
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
	}
	for _, f := range catalog.Families {
		for _, path := range f.KindPackageList() {
			pkg := byPath[path]
			fn, ok := pkg.Types.Scope().Lookup("RegisterKinds").(*types.Func)
			if !ok || fn.Type().String() != "func()" {
				t.Errorf("%s: no func RegisterKinds()", path)
			}
			if call := registersFromInit(pkg); call != "" {
				t.Errorf("%s: init calls %s: a family registers no node kind itself, or every build links all its kinds", path, call)
			}
		}
		for _, kind := range f.NodeKinds {
			pkg := byPath[f.KindPackage(kind)]
			name := kindVar(kind)
			obj, ok := pkg.Types.Scope().Lookup(name).(*types.Var)
			if !ok || obj.Type().String() != runtimePkg+".NodeKind" {
				t.Errorf("%s: no variable %s of type runtime.NodeKind for node kind %q", f.KindPackage(kind), name, kind)
				continue
			}
			if got := kindField(pkg, obj); got != kind {
				t.Errorf("%s.%s has Kind %q, want %q", f.KindPackage(kind), name, got, kind)
			}
		}
	}
}

// registersFromInit returns the first call of a kind registration
// (RegisterNode, RegisterKinds) inside an init function of pkg, "" if none.
func registersFromInit(pkg *packages.Package) string {
	found := ""
	for _, file := range pkg.Syntax {
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != "init" || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || found != "" {
					return found == ""
				}
				var name string
				switch fun := call.Fun.(type) {
				case *ast.Ident:
					name = fun.Name
				case *ast.SelectorExpr:
					name = fun.Sel.Name
				}
				if name == "RegisterNode" || name == "RegisterKinds" {
					found = name + " (" + pkg.Fset.Position(call.Pos()).String() + ")"
				}
				return true
			})
		}
	}
	return found
}

// kindField returns the Kind field of the composite literal obj is
// declared with ("" when it is not one).
func kindField(pkg *packages.Package, obj *types.Var) string {
	for _, file := range pkg.Syntax {
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, id := range vs.Names {
					if pkg.TypesInfo.Defs[id] != obj || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						return ""
					}
					for _, el := range lit.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if key, _ := kv.Key.(*ast.Ident); !ok || key == nil || key.Name != "Kind" {
							continue
						}
						if bl, ok := kv.Value.(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(bl.Value)
							return s
						}
					}
				}
			}
		}
	}
	return ""
}
