package gen

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"debug/gosym"
	"debug/macho"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/capabilities/catalog"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// Inspection is what `kiln inspect` learns from a sealed binary without
// running it: its build info, its embedded manifest, the Go packages whose
// code it contains, and whether those agree.
type Inspection struct {
	Path      string
	Size      int64
	BuildInfo *debug.BuildInfo
	Tags      []string // -tags of the build
	// Manifest is the embedded manifest (ManifestJSON its exact bytes).
	Manifest     *manifest.Manifest
	ManifestJSON []byte
	// TagFamilies are the families the build tags compile in;
	// LinkedFamilies those whose package code is in the binary.
	TagFamilies    []string
	LinkedFamilies []string
	// Packages are the kiln packages with code in the binary, sorted.
	Packages []string
	// Problems lists every disagreement; empty means the binary is what
	// its manifest says.
	Problems []string
}

// OK reports whether no problem was found.
func (in *Inspection) OK() bool { return len(in.Problems) == 0 }

// Inspect reads a sealed binary. The error is for a file that cannot be
// read as a Go binary with a kiln manifest; disagreements between its
// parts are Problems.
func Inspect(path string) (*Inspection, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: not a Go binary with build info: %v", path, err)
	}
	raw, err := manifest.Find(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	m, err := manifest.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded %v", path, err)
	}
	in := &Inspection{Path: path, Size: int64(len(data)), BuildInfo: bi, Manifest: m, ManifestJSON: raw}
	for _, s := range bi.Settings {
		if s.Key == "-tags" && s.Value != "" {
			in.Tags = strings.Split(s.Value, ",")
		}
	}
	in.TagFamilies = catalog.FamiliesOfTags(in.Tags)

	pkgs, err := linkedPackages(data)
	if err != nil {
		in.Problems = append(in.Problems, fmt.Sprintf("cannot list the packages linked into the binary: %v", err))
	}
	linked := map[string]bool{}
	for _, p := range pkgs {
		if strings.HasPrefix(p, catalog.ModulePath+"/") || p == catalog.ModulePath {
			in.Packages = append(in.Packages, p)
		}
		if id, ok := catalog.FamilyOfPackage(p); ok {
			linked[id] = true
		}
	}
	for _, f := range catalog.Families {
		if linked[f.ID] {
			in.LinkedFamilies = append(in.LinkedFamilies, f.ID)
		}
	}
	in.check()
	return in, nil
}

// check compares build tags, manifest and linked packages. What proves
// pruning is what is linked: no capability package of a family the
// manifest does not list. The generated package imports exactly the
// manifest's families and registers the kinds it uses, so kiln build and
// a plain go build link the same packages, and tags change nothing: the
// binary must link exactly the manifest's families. Only a manifest that
// lists build tags (a binary from a kiln that built with -tags
// kiln_custom,kiln_<family>...) has its tags compared as well.
func (in *Inspection) check() {
	m := in.Manifest
	listed := map[string]bool{}
	for _, id := range m.FamilyIDs() {
		listed[id] = true
	}
	if len(m.BuildTags) > 0 && kilnTags(in.Tags) {
		if !slices.Equal(sortedCopy(in.Tags), sortedCopy(m.BuildTags)) {
			in.Problems = append(in.Problems, fmt.Sprintf("build tags disagree: the binary was built with -tags %q, the manifest says %q",
				strings.Join(in.Tags, ","), strings.Join(m.BuildTags, ",")))
		}
		if !slices.Contains(in.Tags, catalog.TagCustom) {
			in.Problems = append(in.Problems, fmt.Sprintf("the binary was built with kiln_<family> tags but not %s: capabilities/all would link every family", catalog.TagCustom))
		}
		if !slices.Equal(in.TagFamilies, catalogOrder(m.FamilyIDs())) {
			in.Problems = append(in.Problems, fmt.Sprintf("families disagree: the build tags compile in %v, the manifest lists %v", in.TagFamilies, m.FamilyIDs()))
		}
	} else if want := in.mustLink(); !slices.Equal(in.LinkedFamilies, want) {
		in.Problems = append(in.Problems, fmt.Sprintf("families disagree: a build without kiln's tags links %v, the manifest lists %v", in.LinkedFamilies, want))
	}
	for _, id := range in.LinkedFamilies {
		if !listed[id] {
			f, _ := catalog.Lookup(id)
			in.Problems = append(in.Problems, fmt.Sprintf("capability package %s is linked into the binary but the manifest does not list family %s", f.Package, id))
		}
	}
}

// mustLink lists, in catalog order, the manifest's families a binary
// without kiln's tags must link: all of them, except an always-listed
// family (control) of which the workflow uses no node kind. Families
// register no kind themselves, so nothing references such a family and
// the linker rightly leaves it out; when it is linked anyway, it counts.
func (in *Inspection) mustLink() []string {
	var ids []string
	for _, id := range in.Manifest.FamilyIDs() {
		f, known := catalog.Lookup(id)
		unused := known && f.Always && !slices.ContainsFunc(f.NodeKinds, func(k string) bool { return slices.Contains(in.Manifest.NodeKinds, k) })
		if !unused || slices.Contains(in.LinkedFamilies, id) {
			ids = append(ids, id)
		}
	}
	return catalogOrder(ids)
}

// kilnTags reports whether any of a build's tags is one of kiln's.
func kilnTags(tags []string) bool {
	for _, t := range tags {
		if t == catalog.TagCustom || len(catalog.FamiliesOfTags([]string{t})) > 0 {
			return true
		}
	}
	return false
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
}

// catalogOrder orders known family ids as the catalog does (unknown ids
// are kept at the end so a comparison still fails on them).
func catalogOrder(ids []string) []string {
	var known, unknown []string
	for _, id := range ids {
		if _, ok := catalog.Lookup(id); ok {
			known = append(known, id)
		} else {
			unknown = append(unknown, id)
		}
	}
	out, _ := catalog.Sort(known)
	return append(out, unknown...)
}

// linkedPackages lists the Go packages with functions in the binary, from
// its pclntab: the function table the runtime keeps for stack traces, so it
// survives -ldflags=-s -w.
func linkedPackages(bin []byte) ([]string, error) {
	tab, err := pclntab(bin)
	if err != nil {
		return nil, err
	}
	t, err := gosym.NewTable(nil, gosym.NewLineTable(tab, 0))
	if err != nil {
		return nil, fmt.Errorf("read function table: %v", err)
	}
	set := map[string]bool{}
	for _, fn := range t.Funcs {
		if p := fn.PackageName(); p != "" {
			set[p] = true
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// pclntab returns the bytes of the Go function table of an ELF or Mach-O
// binary, or of any format by finding its header.
func pclntab(bin []byte) ([]byte, error) {
	r := bytes.NewReader(bin)
	if f, err := elf.NewFile(r); err == nil {
		if s := f.Section(".gopclntab"); s != nil {
			return s.Data()
		}
	}
	if f, err := macho.NewFile(r); err == nil {
		if s := f.Section("__gopclntab"); s != nil {
			return s.Data()
		}
	}
	// Go 1.20+ header: magic 0xfffffff1 (little endian), two zero bytes,
	// instruction size quantum, pointer size.
	for off := 0; ; {
		i := bytes.Index(bin[off:], []byte{0xf1, 0xff, 0xff, 0xff, 0, 0})
		if i < 0 {
			break
		}
		off += i
		if off+8 <= len(bin) && (bin[off+6] == 1 || bin[off+6] == 2 || bin[off+6] == 4) && (bin[off+7] == 4 || bin[off+7] == 8) {
			return bin[off:], nil
		}
		off++
	}
	return nil, errors.New("no Go function table found")
}
