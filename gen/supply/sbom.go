package supply

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kilnworks/kiln/runtime/manifest"
)

// CycloneDX 1.5 JSON, only the parts kiln fills.
type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	SerialNumber string          `json:"serialNumber"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp,omitempty"`
	Tools     cdxTools     `json:"tools"`
	Component cdxComponent `json:"component"`
}

type cdxTools struct {
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref,omitempty"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	Purl       string        `json:"purl,omitempty"`
	Hashes     []cdxHash     `json:"hashes,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// sbomNamespace seeds the content-derived serial number (UUID v5), so the
// same binary always gets the same SBOM.
var sbomNamespace = uuid.MustParse("6b2f6f0e-6b69-4c6e-9b1d-6b696c6e7362")

// Tool names the kiln that generated a program: its version and go.sum
// h1: hash (see gen.KilnSource.Identity).
type Tool struct {
	Version string
	Sum     string
}

// SBOM returns the CycloneDX 1.5 JSON document describing the binary bin
// (whose SHA-256 is binSHA) from its build info, with kiln as the tool. It
// is deterministic: the serial number derives from the binary digest, and
// the timestamp is SOURCE_DATE_EPOCH's (omitted when unset).
func SBOM(bin, binSHA string, facts *BuildFacts, kiln Tool) ([]byte, error) {
	ts, err := SourceDate()
	if err != nil {
		return nil, err
	}
	mainRef := Purl(facts.Main.Path, facts.Main.Version)
	props := []cdxProperty{{Name: "kiln:go_version", Value: facts.GoVersion}}
	if len(facts.Tags) > 0 {
		props = append(props, cdxProperty{Name: "kiln:build_tags", Value: strings.Join(facts.Tags, ",")})
	}
	keys := make([]string, 0, len(facts.Settings))
	for k := range facts.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		props = append(props, cdxProperty{Name: "kiln:build_setting:" + k, Value: facts.Settings[k]})
	}
	bom := cdxBOM{
		BOMFormat:    "CycloneDX",
		SpecVersion:  "1.5",
		SerialNumber: "urn:uuid:" + uuid.NewSHA1(sbomNamespace, []byte(binSHA)).String(),
		Version:      1,
		Metadata: cdxMetadata{
			Tools: cdxTools{Components: []cdxComponent{toolComponent(kiln)}},
			Component: cdxComponent{
				Type:       "application",
				BOMRef:     mainRef,
				Name:       filepath.Base(bin),
				Version:    strings.TrimSuffix(strings.TrimPrefix(facts.Main.Version, "("), ")"),
				Purl:       mainRef,
				Hashes:     []cdxHash{{Alg: "SHA-256", Content: binSHA}},
				Properties: props,
			},
		},
		Components:   []cdxComponent{},
		Dependencies: []cdxDependency{{Ref: mainRef, DependsOn: []string{}}},
	}
	if ts != nil {
		bom.Metadata.Timestamp = ts.Format(time.RFC3339)
	}
	for _, m := range facts.Modules {
		ref := Purl(m.Path, m.Version)
		c := cdxComponent{Type: "library", BOMRef: ref, Name: m.Path, Version: m.Version, Purl: ref}
		if h := SumHex(m.Sum); h != "" {
			c.Hashes = []cdxHash{{Alg: "SHA-256", Content: h}}
		}
		if m.Replace != "" {
			c.Properties = []cdxProperty{{Name: "kiln:replaced_by", Value: m.Replace}}
		}
		bom.Components = append(bom.Components, c)
		bom.Dependencies[0].DependsOn = append(bom.Dependencies[0].DependsOn, ref)
	}
	return marshal(bom)
}

// toolComponent is kiln as an SBOM tool: version, purl and, when known,
// the SHA-256 its h1: sum carries.
func toolComponent(kiln Tool) cdxComponent {
	c := cdxComponent{Type: "application", Name: "kiln", Version: kiln.Version, Purl: Purl(manifest.ModulePath, kiln.Version)}
	if kiln.Version == "devel" {
		c.Purl = Purl(manifest.ModulePath, "")
	}
	if h := SumHex(kiln.Sum); h != "" {
		c.Hashes = []cdxHash{{Alg: "SHA-256", Content: h}}
		c.Properties = []cdxProperty{{Name: "kiln:go_sum", Value: kiln.Sum}}
	}
	return c
}

// SourceDate returns the time SOURCE_DATE_EPOCH names, or nil when it is
// unset: reproducible documents carry no other time.
func SourceDate() (*time.Time, error) {
	v, ok := os.LookupEnv("SOURCE_DATE_EPOCH")
	if !ok || v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a non-negative integer of seconds", v)
	}
	t := time.Unix(n, 0).UTC()
	return &t, nil
}

// marshal writes indented JSON with a final newline and no HTML escaping.
func marshal(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
