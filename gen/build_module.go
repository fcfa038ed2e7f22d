package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/templates"
)

// KilnModule is kiln's module path: generated programs import it.
const KilnModule = manifest.ModulePath

// develVersion is the version a generated go.mod requires kiln at when a
// replace line points at a source tree.
const develVersion = "v0.0.0-00010101000000-000000000000"

// KilnSource is where a generated module finds kiln's packages.
type KilnSource struct {
	// Dir is kiln's module root: a source tree, or the extracted module in
	// the module cache.
	Dir string
	// Version is what the generated go.mod requires kiln at.
	Version string
	// Replace is true when Dir is a source tree reached by a replace line.
	Replace bool
	// GoVersion is the go directive of kiln's go.mod.
	GoVersion string
	// Requires are kiln's own requirements, repeated in the generated
	// go.mod so module graph pruning finds every package.
	Requires []module.Version
	// GoSum is kiln's go.sum (plus kiln's own lines when it comes from the
	// module cache), so the build needs no download.
	GoSum []byte
	// How says how Dir was found (for messages).
	How string
	// Sum is the h1: hash naming this kiln: the module zip's (go.sum) for
	// the module cache, the source tree's dirhash otherwise (TreeHash).
	Sum string
}

// Identity is the kiln version and h1: sum recorded in the manifest, SBOM
// and provenance of what this source generates: the module version for
// the module cache, "devel" for a source tree. It depends only on the
// source, not on how the running kiln binary was built.
func (src *KilnSource) Identity() (version, sum string) {
	if src.Replace {
		return "devel", src.Sum
	}
	return src.Version, src.Sum
}

// TreeHash is the h1: hash (golang.org/x/mod/sumdb/dirhash, as go.sum
// uses) of a kiln source tree's files: every regular file, except in
// folders whose name starts with "." or "_" (.git, .cache: not source),
// in nested modules (a folder with its own go.mod), and compiled programs
// (a `go build ./cmd/kiln` output left in the tree is not source).
func TreeHash(dir string) (string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == dir {
				return nil
			}
			if n := d.Name(); strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			exe, err := isExecutable(p)
			if err != nil {
				return err
			}
			if !exe {
				files = append(files, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash kiln's source tree %s: %w", dir, err)
	}
	prefix := KilnModule + "@devel/"
	for i, f := range files {
		files[i] = prefix + f
	}
	sum, err := dirhash.Hash1(files, func(name string) (io.ReadCloser, error) {
		return os.Open(filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(name, prefix))))
	})
	if err != nil {
		return "", fmt.Errorf("hash kiln's source tree %s: %w", dir, err)
	}
	return sum, nil
}

// isExecutable reports whether a file starts like a compiled program
// (ELF, Mach-O, PE).
func isExecutable(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var head [4]byte
	n, _ := io.ReadFull(f, head[:])
	b := head[:n]
	for _, magic := range [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {0xca, 0xfe, 0xba, 0xbe}, {'M', 'Z'}} {
		if bytes.HasPrefix(b, magic) {
			return true, nil
		}
	}
	return false, nil
}

// GeneratorIdentity names the running kiln for what it generates without
// building (kiln gen): the version and sum in its own build info when it
// came from the module cache, else the h1: hash of the source tree it finds
// (FindKilnSource), else "devel" without a sum.
func GeneratorIdentity(explicit string) (version, sum string) {
	if m := manifest.KilnModuleInfo(); m != nil && m.Replace == nil && m.Sum != "" && manifest.KilnVersion() != "devel" {
		return m.Version, m.Sum
	}
	src, err := FindKilnSource(explicit)
	if err != nil {
		return "devel", ""
	}
	return src.Identity()
}

// FindKilnSource locates kiln's packages for a generated module, in the
// order ARCHITECTURE.md gives: explicit dir (--kiln-source), $KILN_SOURCE,
// a go.mod of module kiln found walking up from the working directory, the
// directory kiln was replaced by when this binary was built, the module
// cache at the version in this binary's build info.
func FindKilnSource(explicit string) (*KilnSource, error) {
	if explicit != "" {
		return sourceTree(explicit, "--kiln-source")
	}
	if env := os.Getenv("KILN_SOURCE"); env != "" {
		return sourceTree(env, "$KILN_SOURCE")
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; {
			if isKilnModule(dir) {
				return sourceTree(dir, "the working directory's module")
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if dir, ok := replacedKilnDir(); ok {
		return sourceTree(dir, "the replace directive this kiln was built with")
	}
	v := manifest.KilnVersion()
	if v == "devel" {
		return nil, errors.New("cannot find kiln's source: this kiln is a development build and the working directory is not inside the kiln module; pass --kiln-source DIR, set KILN_SOURCE, or run kiln as `go tool kiln` from a module that pins it with a replace (docs/pipelines.md)")
	}
	return CachedKilnSource(v)
}

// replacedKilnDir finds the source tree of a kiln built with a directory
// replacement (a user module's `replace github.com/kilnworks/kiln =>
// ../kiln`, run as `go tool kiln`). A relative path is relative to that
// module's root, an ancestor of the working directory: try each.
func replacedKilnDir() (string, bool) {
	m := manifest.KilnModuleInfo()
	// A directory replacement has no version ("(devel)" in build info).
	if m == nil || m.Replace == nil || (m.Replace.Version != "" && m.Replace.Version != "(devel)") {
		return "", false
	}
	p := m.Replace.Path
	if filepath.IsAbs(p) {
		return p, isKilnModule(p)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for dir := wd; ; {
		if cand := filepath.Join(dir, p); isKilnModule(cand) {
			return cand, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func isKilnModule(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && modfile.ModulePath(data) == KilnModule
}

// sourceTree reads a kiln source tree.
func sourceTree(dir, how string) (*KilnSource, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if !isKilnModule(abs) {
		return nil, fmt.Errorf("%s %s is not the kiln module (no go.mod declaring %s)", how, dir, KilnModule)
	}
	src := &KilnSource{Dir: abs, Version: develVersion, Replace: true, How: how}
	if err := src.readModule(); err != nil {
		return nil, err
	}
	if src.Sum, err = TreeHash(abs); err != nil {
		return nil, err
	}
	return src, nil
}

// CachedKilnSource uses the released kiln at version v from the module
// cache; its go.sum lines come from the cache's own hash files.
func CachedKilnSource(v string) (*KilnSource, error) {
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	esc, err := module.EscapePath(KilnModule)
	if err != nil {
		return nil, err
	}
	escV, err := module.EscapeVersion(v)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, filepath.FromSlash(esc)+"@"+escV)
	if !isKilnModule(dir) {
		return nil, fmt.Errorf("kiln %s is not in the module cache (%s): pass --kiln-source DIR (a kiln checkout), or pin kiln in your module with a replace to a checkout, vendored copy or mirror, as docs/pipelines.md shows", v, cache)
	}
	src := &KilnSource{Dir: dir, Version: v, How: "the module cache"}
	if err := src.readModule(); err != nil {
		return nil, err
	}
	dl := filepath.Join(cache, "cache", "download", filepath.FromSlash(esc), "@v", escV)
	zipHash, err := os.ReadFile(dl + ".ziphash")
	if err != nil {
		return nil, fmt.Errorf("kiln %s: module cache has no hash of the module zip: %w", v, err)
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) { return os.Open(dl + ".mod") })
	if err != nil {
		return nil, fmt.Errorf("kiln %s: %w", v, err)
	}
	src.Sum = strings.TrimSpace(string(zipHash))
	src.GoSum = append(src.GoSum, fmt.Sprintf("%s %s %s\n%s %s/go.mod %s\n",
		KilnModule, v, strings.TrimSpace(string(zipHash)), KilnModule, v, modHash)...)
	return src, nil
}

// readModule reads go.mod and go.sum of src.Dir.
func (src *KilnSource) readModule() error {
	gomod := filepath.Join(src.Dir, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return err
	}
	mf, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		return err
	}
	if mf.Go != nil {
		src.GoVersion = mf.Go.Version
	}
	for _, r := range mf.Require {
		src.Requires = append(src.Requires, r.Mod)
	}
	src.GoSum, err = os.ReadFile(filepath.Join(src.Dir, "go.sum"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// moduleData is what templates/go.mod.tmpl renders.
type moduleData struct {
	Workflow    string
	Module      string
	GoVersion   string
	KilnModule  string
	KilnVersion string
	Requires    []module.Version
	Replace     string
}

// ModuleFiles returns the go.mod and go.sum of a standalone module named
// modPath holding a generated program that uses kiln from src. replace is
// the path written in the replace line (when src is a source tree).
func ModuleFiles(plan *Plan, modPath string, src *KilnSource, replace string) (gomod, gosum []byte, err error) {
	if err := module.CheckPath(modPath); err != nil {
		// Main modules may use paths without a dot; check the weaker rule.
		if err2 := module.CheckImportPath(modPath); err2 != nil {
			return nil, nil, fmt.Errorf("module path %q: %v", modPath, err2)
		}
	}
	tmpl, err := template.ParseFS(templates.FS, "go.mod.tmpl")
	if err != nil {
		return nil, nil, err
	}
	d := moduleData{
		Workflow:    plan.Workflow.Name,
		Module:      modPath,
		GoVersion:   src.GoVersion,
		KilnModule:  KilnModule,
		KilnVersion: src.Version,
		Requires:    src.Requires,
	}
	if src.Replace {
		d.Replace = replace
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, d); err != nil {
		return nil, nil, err
	}
	// Let modfile check and format what the template produced.
	mf, err := modfile.Parse("go.mod", buf.Bytes(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("generated go.mod: %w", err)
	}
	if gomod, err = mf.Format(); err != nil {
		return nil, nil, err
	}
	return gomod, src.GoSum, nil
}

// goEnv reads one `go env` variable.
func goEnv(name string) (string, error) {
	out, err := goCommand(context.Background(), "", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
