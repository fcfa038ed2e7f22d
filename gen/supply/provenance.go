package supply

import (
	"path/filepath"
	"sort"
	"time"

	"github.com/kilnworks/kiln/runtime/manifest"
)

// Identifiers written into provenance: what built the binary and how.
const (
	BuildType = "https://github.com/kilnworks/kiln/blob/main/docs/supply-chain.md#build-type-v1"
	BuilderID = "https://github.com/kilnworks/kiln/cmd/kiln"
)

// ProvenanceInfo is what the generator knows about a build beyond the
// binary's own build info.
type ProvenanceInfo struct {
	Workflow    string           // workflow name
	Inputs      []manifest.Input // workflow, children, schemas, prompts, needs catalogs
	KilnVersion string
	KilnSum     string // kiln's h1: hash ("" = not known)
}

type statement struct {
	Type          string     `json:"_type"`
	Subject       []resource `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     slsaPred   `json:"predicate"`
}

type resource struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type slsaPred struct {
	BuildDefinition buildDefinition `json:"buildDefinition"`
	RunDetails      runDetails      `json:"runDetails"`
}

type buildDefinition struct {
	BuildType            string         `json:"buildType"`
	ExternalParameters   map[string]any `json:"externalParameters"`
	InternalParameters   map[string]any `json:"internalParameters"`
	ResolvedDependencies []resource     `json:"resolvedDependencies"`
}

type runDetails struct {
	Builder  builder       `json:"builder"`
	Metadata *buildMetaDat `json:"metadata,omitempty"`
}

type builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version,omitempty"`
}

type buildMetaDat struct {
	StartedOn  string `json:"startedOn,omitempty"`
	FinishedOn string `json:"finishedOn,omitempty"`
}

// Provenance returns an in-toto Statement v1 whose predicate is SLSA
// provenance v1: the subject is the binary and its digest, the resolved
// dependencies are the input files and the linked Go modules. It is
// deterministic; the only time written is SOURCE_DATE_EPOCH's.
func Provenance(bin, binSHA string, facts *BuildFacts, info ProvenanceInfo) ([]byte, error) {
	ts, err := SourceDate()
	if err != nil {
		return nil, err
	}
	var deps []resource
	inputs := append([]manifest.Input(nil), info.Inputs...)
	// Stable: inputs of one path (a file that is two kinds of input) keep
	// the manifest's order, so the document does not depend on the sort.
	sort.SliceStable(inputs, func(i, j int) bool { return inputs[i].Path < inputs[j].Path })
	for _, in := range inputs {
		r := resource{Name: filepath.ToSlash(in.Path), Digest: map[string]string{"sha256": in.SHA256}}
		if in.Kind != "" {
			r.Annotations = map[string]string{"kind": in.Kind}
		}
		deps = append(deps, r)
	}
	for _, m := range facts.Modules {
		r := resource{Name: m.Path, URI: Purl(m.Path, m.Version)}
		if h := SumHex(m.Sum); h != "" {
			r.Digest = map[string]string{"sha256": h}
		}
		if m.Replace != "" {
			r.Annotations = map[string]string{"replaced_by": m.Replace}
		}
		deps = append(deps, r)
	}
	ext := map[string]any{"workflow": info.Workflow}
	if len(facts.Tags) > 0 {
		ext["build_tags"] = facts.Tags
	}
	st := statement{
		Type:          "https://in-toto.io/Statement/v1",
		Subject:       []resource{{Name: filepath.Base(bin), Digest: map[string]string{"sha256": binSHA}}},
		PredicateType: "https://slsa.dev/provenance/v1",
		Predicate: slsaPred{
			BuildDefinition: buildDefinition{
				BuildType:          BuildType,
				ExternalParameters: ext,
				InternalParameters: map[string]any{
					"go_version":     facts.GoVersion,
					"main_module":    facts.Main.Path,
					"build_settings": facts.Settings,
				},
				ResolvedDependencies: deps,
			},
			RunDetails: runDetails{Builder: builder{ID: BuilderID, Version: builderVersion(info)}},
		},
	}
	if ts != nil {
		s := ts.Format(time.RFC3339)
		st.Predicate.RunDetails.Metadata = &buildMetaDat{StartedOn: s, FinishedOn: s}
	}
	return marshal(st)
}

// builderVersion is kiln's version and, when known, its go.sum h1: hash.
func builderVersion(info ProvenanceInfo) map[string]string {
	v := map[string]string{"kiln": info.KilnVersion}
	if info.KilnSum != "" {
		v["kiln_sum"] = info.KilnSum
	}
	return v
}
