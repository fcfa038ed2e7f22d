package all

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/capabilities/catalog"
)

var update = flag.Bool("update", false, "rewrite the per-family files from the catalog")

// familyFile is the source of the file that links family f and
// registers all its node kinds, from the family package and from its kind
// packages (families register none from init). The family serving routes
// also registers its auth kinds and enables [server.tls], async routes and
// idempotency keys, which generated programs link only when their
// workflow declares them.
func familyFile(f catalog.Family) []byte {
	var imports, calls string
	// Every package declaring kinds of f (its own, and those of
	// KindPackages) registers them.
	for _, p := range f.KindPackageList() {
		name := f.ID
		if p != f.Package {
			name = path.Base(p)
		}
		imports += fmt.Sprintf("%s %q\n", name, p)
		calls += name + ".RegisterKinds()\n"
	}
	if f.Routes {
		if !strings.Contains(imports, fmt.Sprintf("%q", f.Package)) {
			imports = fmt.Sprintf("%s %q\n", f.ID, f.Package) + imports
		}
		calls += f.ID + ".RegisterAuthKinds()\n" + f.ID + ".EnableTLS()\n" + f.ID + ".EnableAsync()\n" + f.ID + ".EnableIdempotency()\n"
	}
	src := fmt.Sprintf(`// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !%s || %s

package all

import _ %q
`, catalog.TagCustom, f.Tag, f.Package)
	if calls != "" {
		src = fmt.Sprintf(`// Code generated from capabilities/catalog by TestFilesMatchCatalog; DO NOT EDIT.

//go:build !%s || %s

package all

import (
%s)

func init() {
%s}
`, catalog.TagCustom, f.Tag, imports, calls)
	}
	out, err := format.Source([]byte(src))
	if err != nil {
		panic(err)
	}
	return out
}

// TestFilesMatchCatalog keeps one file per catalog family, and no other
// family file, in this directory.
func TestFilesMatchCatalog(t *testing.T) {
	want := map[string][]byte{}
	for _, f := range catalog.Families {
		want[f.ID+".go"] = familyFile(f)
	}
	if *update {
		for name, data := range want {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, data := range want {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v (run go test ./capabilities/all -update)", name, err)
			continue
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s drifted from the catalog (run go test ./capabilities/all -update):\n%s", name, got)
		}
	}
	entries, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e == "doc.go" || strings.HasSuffix(e, "_test.go") {
			continue
		}
		if _, ok := want[e]; !ok {
			t.Errorf("%s: not a catalog family; remove it", e)
		}
	}
}
