// Package manifest is the description a sealed binary carries of itself:
// which workflow it runs, which capability families, node kinds and build
// tags it was built with, and the digests of its inputs.
//
// The generator writes the manifest once, as canonical JSON; the sealed
// binary embeds those exact bytes between markers (Wrap), prints them
// (`BIN manifest`), and `kiln inspect` finds them in the file without
// running it (Find). Fields are additive: new ones get omitempty JSON tags
// so older manifests still decode.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// Schema identifies this manifest shape.
const Schema = "kiln.manifest/v1"

// Manifest describes one sealed binary.
type Manifest struct {
	Schema   string   `json:"schema"`
	Workflow Workflow `json:"workflow"`
	// KilnVersion is the version of the kiln that generated the program.
	KilnVersion string `json:"kiln_version"`
	// KilnSum is that kiln's go.sum h1: hash: its module's from the
	// module cache, or the dirhash of its source tree ("devel").
	KilnSum string `json:"kiln_sum,omitempty"`
	// GoVersion is the toolchain that built the binary (empty when the
	// program was generated without building it; the binary then reports
	// its own runtime version).
	GoVersion string `json:"go_version,omitempty"`
	// BuildTags are the -tags of the build: empty, as kiln builds without
	// tags; a binary from an older kiln lists kiln_custom, then kiln_<id>
	// of each family in catalog order.
	BuildTags []string `json:"build_tags"`
	Families  []Family `json:"families"`
	// NodeKinds, Triggers and AuthKinds are what the workflow tree uses.
	NodeKinds []string `json:"node_kinds"`
	Triggers  []string `json:"triggers,omitempty"`
	AuthKinds []string `json:"auth_kinds,omitempty"`
	// CapabilityKeys are the requires_capabilities keys the families provide.
	CapabilityKeys []string `json:"capability_keys"`
	// Inputs are the files the program was generated from, with digests;
	// paths are relative to the root workflow's directory.
	Inputs []Input `json:"inputs"`
	// Degraded lists required capability keys deliberately left out.
	Degraded []string `json:"degraded,omitempty"`

	// Supply chain (gen/supply, docs/supply-chain.md).

	// EffectiveNeedsSHA256 is the digest of the effective needs embedded
	// in the binary.
	EffectiveNeedsSHA256 string `json:"effective_needs_sha256,omitempty"`
	// TablesSHA256 is the digest of the workflow tree as compiled into the
	// static tables (TablesDigest); the sealed binary's `verify` recomputes it.
	TablesSHA256 string `json:"tables_sha256,omitempty"`
	// The fields below exist only in BIN.manifest.json beside the binary:
	// they describe the finished build, which cannot embed its own digest.
	// MainModule and Modules are read back from the binary's build info.
	MainModule   *Module  `json:"main_module,omitempty"`
	Modules      []Module `json:"modules,omitempty"`
	BinarySHA256 string   `json:"binary_sha256,omitempty"`
}

// Module is a Go module linked into the binary, as its build info records
// it. A replaced module keeps its required path; Version and Sum are the
// replacement's, and Replace names the replacement path.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Sum     string `json:"sum,omitempty"`
	Replace string `json:"replace,omitempty"`
}

// Workflow names the root workflow and the SHA-256 of its source bytes.
type Workflow struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Family is one capability family linked into the binary.
type Family struct {
	ID      string   `json:"id"`
	Package string   `json:"package"`
	Tag     string   `json:"tag"`
	Keys    []string `json:"keys,omitempty"`
}

// Input is one file the program was generated from.
type Input struct {
	Path   string `json:"path"`
	Kind   string `json:"kind"` // workflow | child | schema | prompt | jwks | needs
	SHA256 string `json:"sha256"`
}

// FamilyIDs returns the ids of m's families, in manifest order.
func (m *Manifest) FamilyIDs() []string {
	out := make([]string, len(m.Families))
	for i, f := range m.Families {
		out[i] = f.ID
	}
	return out
}

// Encode renders m as canonical JSON: fields in declaration order,
// two-space indentation, no HTML escaping, a final newline.
func Encode(m *Manifest) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Decode parses manifest JSON, refusing unknown shapes.
func Decode(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %v", err)
	}
	if m.Schema != Schema {
		return nil, fmt.Errorf("manifest schema %q, want %q", m.Schema, Schema)
	}
	return &m, nil
}

// The embedded form is begin, the JSON length as lenDigits decimal
// digits, a NUL, the JSON, then end. The length and the end marker let
// Find tell the real blob from a stray copy of the marker text.
const (
	begin     = "\x00KILN-MANIFEST\x00"
	end       = "\x00KILN-MANIFEST-END\x00"
	lenDigits = 8
)

// Wrap returns the marker-delimited form of manifest JSON that a sealed
// binary embeds.
func Wrap(data []byte) string {
	return fmt.Sprintf("%s%0*d\x00%s%s", begin, lenDigits, len(data), data, end)
}

// Unwrap returns the JSON inside a blob made by Wrap.
func Unwrap(blob []byte) ([]byte, error) {
	data, ok := parseAt(blob, 0)
	if !ok || len(begin)+lenDigits+1+len(data)+len(end) != len(blob) {
		return nil, fmt.Errorf("embedded manifest is malformed")
	}
	return data, nil
}

// parseAt reads a wrapped blob starting at b[i:]; ok is false when the
// bytes there are not a complete blob.
func parseAt(b []byte, i int) (data []byte, ok bool) {
	if !bytes.HasPrefix(b[i:], []byte(begin)) {
		return nil, false
	}
	i += len(begin)
	if len(b) < i+lenDigits+1 || b[i+lenDigits] != 0 {
		return nil, false
	}
	n, err := strconv.Atoi(string(b[i : i+lenDigits]))
	if err != nil || n < 0 {
		return nil, false
	}
	i += lenDigits + 1
	if len(b) < i+n+len(end) || !bytes.Equal(b[i+n:i+n+len(end)], []byte(end)) {
		return nil, false
	}
	return b[i : i+n], true
}

// Find locates the manifest embedded in a binary's bytes without running
// it. It fails when there is none, or when there are several that differ.
func Find(bin []byte) ([]byte, error) {
	var found []byte
	for off := 0; ; {
		j := bytes.Index(bin[off:], []byte(begin))
		if j < 0 {
			break
		}
		off += j
		if data, ok := parseAt(bin, off); ok {
			if found != nil && !bytes.Equal(found, data) {
				return nil, fmt.Errorf("the file embeds two different kiln manifests")
			}
			found = data
		}
		off += len(begin)
	}
	if found == nil {
		return nil, fmt.Errorf("no embedded kiln manifest (not a sealed kiln binary?)")
	}
	return found, nil
}

// KilnVersion is the version of the kiln module linked into the running
// program, from its build info: the version kiln was built or required at;
// "devel" for a source build (a directory replacement, no version, or a
// modified checkout).
func KilnVersion() string {
	m := KilnModuleInfo()
	if m == nil {
		return "devel"
	}
	v := m.Version
	if m.Replace != nil {
		v = m.Replace.Version // "(devel)" for a directory
	}
	if v == "" || v == "(devel)" || strings.HasSuffix(v, "+dirty") {
		return "devel"
	}
	return v
}

// KilnModuleInfo is kiln's module in the running program's build info
// (the main module, or a dependency), nil when there is none.
func KilnModuleInfo() *debug.Module {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	if bi.Main.Path == ModulePath {
		return &bi.Main
	}
	for _, d := range bi.Deps {
		if d.Path == ModulePath {
			return d
		}
	}
	return nil
}

// ModulePath is kiln's module path.
const ModulePath = "github.com/kilnworks/kiln"
