package supply

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime/manifest"
)

// Module is one module linked into a binary (see manifest.Module).
type Module = manifest.Module

// BuildFacts is what a Go binary's embedded build info says about how it
// was built: the facts a manifest records and `kiln verify` re-reads.
type BuildFacts struct {
	GoVersion string   `json:"go_version"`
	Main      Module   `json:"main"`
	Modules   []Module `json:"modules"`
	Tags      []string `json:"build_tags"`
	// Settings are the -trimpath, -ldflags, CGO_ENABLED, GOOS, GOARCH, ...
	// lines of `go version -m`.
	Settings map[string]string `json:"settings"`
}

// ReadBuildFacts reads the build info embedded in the Go binary at path.
func ReadBuildFacts(path string) (*BuildFacts, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read Go build info: %v", path, err)
	}
	return FactsFromBuildInfo(bi), nil
}

// FactsFromBuildInfo converts build info to BuildFacts, modules sorted by path.
func FactsFromBuildInfo(bi *debug.BuildInfo) *BuildFacts {
	f := &BuildFacts{GoVersion: bi.GoVersion, Main: moduleOf(&bi.Main), Settings: map[string]string{}}
	for _, d := range bi.Deps {
		f.Modules = append(f.Modules, moduleOf(d))
	}
	sort.Slice(f.Modules, func(i, j int) bool { return f.Modules[i].Path < f.Modules[j].Path })
	for _, s := range bi.Settings {
		f.Settings[s.Key] = s.Value
		if s.Key == "-tags" && s.Value != "" {
			f.Tags = strings.Split(s.Value, ",")
		}
	}
	return f
}

// moduleOf records a replaced module under its required path with the
// replacement's version and sum; a local directory replacement has
// neither, so the required version stays and Replace says where it came from.
func moduleOf(m *debug.Module) Module {
	out := Module{Path: m.Path, Version: m.Version, Sum: m.Sum}
	if r := m.Replace; r != nil {
		out.Sum, out.Replace = r.Sum, r.Path
		if r.Version != "" && r.Version != "(devel)" {
			out.Version = r.Version
		}
	}
	return out
}

// SumHex turns a go.sum "h1:" hash (base64 SHA-256 of the module's file
// list) into lowercase hex, the form CycloneDX and SLSA digests use. It
// returns "" for anything else.
func SumHex(sum string) string {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return ""
	}
	return hex.EncodeToString(raw)
}

// FileSHA256 returns the lowercase hex SHA-256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Purl is the package URL of a Go module version; a source build's
// "(devel)" has no version to name.
func Purl(path, version string) string {
	p := "pkg:golang/" + path
	if version != "" && version != "(devel)" {
		p += "@" + strings.ReplaceAll(version, "+", "%2B")
	}
	return p
}
