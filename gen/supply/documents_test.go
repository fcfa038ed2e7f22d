package supply

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/manifest"
)

// These tests read the SBOM and the provenance field by field against the
// build facts of the binary they describe: every conditional part (build
// tags, replaced modules, module and kiln digests, input kinds, the
// SOURCE_DATE_EPOCH time) must be there exactly when its fact is.

// replacedModule is a module the sample does not link, replaced by a
// local directory (no sum): what a `replace` directive to a checkout leaves
// in build info.
var replacedModule = Module{Path: "example.com/forked", Version: "v0.1.0", Replace: "../forked"}

// sampleFacts returns the sample binary's digest and build facts, with
// replacedModule added after its real modules.
func sampleFacts(t *testing.T) (bin, sum string, facts *BuildFacts) {
	t.Helper()
	bin = sampleBinary(t)
	facts, err := ReadBuildFacts(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts.Modules) != 1 || facts.Modules[0].Path != "github.com/BurntSushi/toml" || SumHex(facts.Modules[0].Sum) == "" {
		t.Fatalf("the sample should link one module with an h1: sum: %+v", facts.Modules)
	}
	if strings.Join(facts.Tags, ",") != "kiln_custom,kiln_fs" {
		t.Fatalf("sample tags %v", facts.Tags)
	}
	facts.Modules = append(facts.Modules, replacedModule)
	sum, err = FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bin, sum, facts
}

// withoutTags is facts built without -tags.
func withoutTags(facts *BuildFacts) *BuildFacts {
	c := *facts
	c.Tags = nil
	return &c
}

type provDoc struct {
	Subject []struct {
		Name   string
		Digest map[string]string
	}
	Predicate struct {
		BuildDefinition struct {
			ExternalParameters   map[string]any
			InternalParameters   map[string]any
			ResolvedDependencies []struct {
				Name, URI   string
				Digest      map[string]string
				Annotations map[string]string
			}
		}
		RunDetails struct {
			Builder struct {
				ID      string
				Version map[string]string
			}
			Metadata *struct{ StartedOn, FinishedOn string }
		}
	}
}

func decodeProvenance(t *testing.T, data []byte) provDoc {
	t.Helper()
	var d provDoc
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("provenance is not JSON: %v\n%s", err, data)
	}
	return d
}

func TestProvenanceRecordsEveryBuildFact(t *testing.T) {
	bin, sum, facts := sampleFacts(t)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	kilnSum := facts.Modules[0].Sum // any valid h1: hash
	info := ProvenanceInfo{Workflow: "hello", KilnVersion: "v1.2.3", KilnSum: kilnSum, Inputs: []manifest.Input{
		{Path: "workflow.toml", Kind: "workflow", SHA256: strings.Repeat("1", 64)},
		{Path: "notes.txt", SHA256: strings.Repeat("3", 64)}, // no kind
	}}
	data, err := Provenance(bin, sum, facts, info)
	if err != nil {
		t.Fatal(err)
	}
	d := decodeProvenance(t, data)
	if len(d.Subject) != 1 || d.Subject[0].Name != "hello" || !reflect.DeepEqual(d.Subject[0].Digest, map[string]string{"sha256": sum}) {
		t.Fatalf("subject %+v, want hello with sha256 %s", d.Subject, sum)
	}

	deps := d.Predicate.BuildDefinition.ResolvedDependencies
	if len(deps) != 4 {
		t.Fatalf("resolved dependencies %+v, want 2 inputs and 2 modules", deps)
	}
	// Inputs, sorted by path: the kind is an annotation only when known.
	if deps[0].Name != "notes.txt" || deps[0].Annotations != nil || deps[0].Digest["sha256"] != strings.Repeat("3", 64) {
		t.Errorf("input without a kind: %+v", deps[0])
	}
	if deps[1].Name != "workflow.toml" || !reflect.DeepEqual(deps[1].Annotations, map[string]string{"kind": "workflow"}) {
		t.Errorf("workflow input: %+v, want annotation kind=workflow", deps[1])
	}
	// Modules: a digest when the sum is an h1: hash, replaced_by when replaced.
	toml := deps[2]
	if toml.Name != "github.com/BurntSushi/toml" || toml.URI != "pkg:golang/github.com/BurntSushi/toml@v1.6.0" ||
		!reflect.DeepEqual(toml.Digest, map[string]string{"sha256": SumHex(facts.Modules[0].Sum)}) || toml.Annotations != nil {
		t.Errorf("linked module: %+v, want its h1: sum as sha256 and no annotation", toml)
	}
	forked := deps[3]
	if forked.Name != replacedModule.Path || forked.URI != "pkg:golang/example.com/forked@v0.1.0" || forked.Digest != nil ||
		!reflect.DeepEqual(forked.Annotations, map[string]string{"replaced_by": "../forked"}) {
		t.Errorf("replaced module: %+v, want no digest and replaced_by=../forked", forked)
	}

	ext := d.Predicate.BuildDefinition.ExternalParameters
	if ext["workflow"] != "hello" || !reflect.DeepEqual(ext["build_tags"], []any{"kiln_custom", "kiln_fs"}) {
		t.Errorf("external parameters %v, want workflow hello and the binary's build tags", ext)
	}
	in := d.Predicate.BuildDefinition.InternalParameters
	settings, _ := in["build_settings"].(map[string]any)
	if in["go_version"] != facts.GoVersion || in["main_module"] != "example.com/sealed" ||
		len(settings) != len(facts.Settings) || settings["-tags"] != "kiln_custom,kiln_fs" || settings["-trimpath"] != "true" {
		t.Errorf("internal parameters %v, want the binary's Go version, main module and build settings %v", in, facts.Settings)
	}
	if b := d.Predicate.RunDetails.Builder; b.ID != BuilderID || !reflect.DeepEqual(b.Version, map[string]string{"kiln": "v1.2.3", "kiln_sum": kilnSum}) {
		t.Errorf("builder %+v, want kiln v1.2.3 with its sum", b)
	}
	if d.Predicate.RunDetails.Metadata != nil {
		t.Errorf("times written without SOURCE_DATE_EPOCH: %+v", d.Predicate.RunDetails.Metadata)
	}

	// No tags, no kiln sum: neither key is written (not even empty).
	info.KilnSum = ""
	data, err = Provenance(bin, sum, withoutTags(facts), info)
	if err != nil {
		t.Fatal(err)
	}
	d = decodeProvenance(t, data)
	if _, ok := d.Predicate.BuildDefinition.ExternalParameters["build_tags"]; ok {
		t.Errorf("build_tags written for a build without tags: %v", d.Predicate.BuildDefinition.ExternalParameters)
	}
	if v := d.Predicate.RunDetails.Builder.Version; !reflect.DeepEqual(v, map[string]string{"kiln": "v1.2.3"}) {
		t.Errorf("builder version %v, want only kiln v1.2.3 when its sum is not known", v)
	}
}

func TestSourceDateEpochBounds(t *testing.T) {
	bin, sum, facts := sampleFacts(t)
	// 0 is the epoch itself, a valid time.
	t.Setenv("SOURCE_DATE_EPOCH", "0")
	data, err := Provenance(bin, sum, facts, ProvenanceInfo{Workflow: "hello"})
	if err != nil {
		t.Fatalf("SOURCE_DATE_EPOCH=0 refused: %v", err)
	}
	if m := decodeProvenance(t, data).Predicate.RunDetails.Metadata; m == nil || m.StartedOn != "1970-01-01T00:00:00Z" || m.FinishedOn != m.StartedOn {
		t.Errorf("provenance times %+v, want 1970-01-01T00:00:00Z", m)
	}
	sbom, err := SBOM(bin, sum, facts, Tool{Version: "v1.2.3"})
	if err != nil {
		t.Fatalf("SOURCE_DATE_EPOCH=0 refused: %v", err)
	}
	if d := decodeSBOM(t, sbom); d.Metadata.Timestamp != "1970-01-01T00:00:00Z" {
		t.Errorf("SBOM timestamp %q, want 1970-01-01T00:00:00Z", d.Metadata.Timestamp)
	}
	for _, bad := range []string{"-1", "1.5", "1e9"} {
		t.Setenv("SOURCE_DATE_EPOCH", bad)
		if _, err := SourceDate(); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH=\""+bad+"\"") {
			t.Errorf("SOURCE_DATE_EPOCH=%s: %v, want an error naming it", bad, err)
		}
	}
}

type sbomDoc struct {
	Metadata struct {
		Timestamp string
		Tools     struct{ Components []cdxComponent }
		Component cdxComponent
	}
	Components   []cdxComponent
	Dependencies []cdxDependency
}

func decodeSBOM(t *testing.T, data []byte) sbomDoc {
	t.Helper()
	var d sbomDoc
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("SBOM is not JSON: %v\n%s", err, data)
	}
	return d
}

// property returns the value of the named property and whether it is there.
func property(c cdxComponent, name string) (string, bool) {
	for _, p := range c.Properties {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

func TestSBOMRecordsEveryBuildFact(t *testing.T) {
	bin, sum, facts := sampleFacts(t)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	kilnSum := facts.Modules[0].Sum
	data, err := SBOM(bin, sum, facts, Tool{Version: "v1.2.3", Sum: kilnSum})
	if err != nil {
		t.Fatal(err)
	}
	d := decodeSBOM(t, data)

	app := d.Metadata.Component
	if app.Type != "application" || app.Name != "hello" || app.Purl != "pkg:golang/example.com/sealed" ||
		!reflect.DeepEqual(app.Hashes, []cdxHash{{Alg: "SHA-256", Content: sum}}) {
		t.Errorf("described binary %+v, want hello with SHA-256 %s", app, sum)
	}
	if v, ok := property(app, "kiln:build_tags"); !ok || v != "kiln_custom,kiln_fs" {
		t.Errorf("kiln:build_tags = %q (%v), want kiln_custom,kiln_fs", v, ok)
	}
	if v, _ := property(app, "kiln:go_version"); v != facts.GoVersion {
		t.Errorf("kiln:go_version = %q, want %q", v, facts.GoVersion)
	}
	for k, want := range facts.Settings {
		if v, ok := property(app, "kiln:build_setting:"+k); !ok || v != want {
			t.Errorf("kiln:build_setting:%s = %q (%v), want %q", k, v, ok, want)
		}
	}

	if len(d.Components) != 2 {
		t.Fatalf("components %+v, want the linked and the replaced module", d.Components)
	}
	toml, forked := d.Components[0], d.Components[1]
	if toml.Name != "github.com/BurntSushi/toml" || toml.Properties != nil ||
		!reflect.DeepEqual(toml.Hashes, []cdxHash{{Alg: "SHA-256", Content: SumHex(facts.Modules[0].Sum)}}) {
		t.Errorf("linked module %+v, want its h1: sum as SHA-256 and no property", toml)
	}
	if forked.Name != replacedModule.Path || forked.Version != "v0.1.0" || forked.Hashes != nil ||
		!reflect.DeepEqual(forked.Properties, []cdxProperty{{Name: "kiln:replaced_by", Value: "../forked"}}) {
		t.Errorf("replaced module %+v, want no hash and kiln:replaced_by=../forked", forked)
	}
	if len(d.Dependencies) != 1 || d.Dependencies[0].Ref != app.BOMRef ||
		!reflect.DeepEqual(d.Dependencies[0].DependsOn, []string{toml.BOMRef, forked.BOMRef}) {
		t.Errorf("dependencies %+v", d.Dependencies)
	}

	tools := d.Metadata.Tools.Components
	if len(tools) != 1 {
		t.Fatalf("tools %+v, want kiln", tools)
	}
	kiln := tools[0]
	if kiln.Name != "kiln" || kiln.Version != "v1.2.3" || kiln.Purl != "pkg:golang/github.com/kilnworks/kiln@v1.2.3" ||
		!reflect.DeepEqual(kiln.Hashes, []cdxHash{{Alg: "SHA-256", Content: SumHex(kilnSum)}}) ||
		!reflect.DeepEqual(kiln.Properties, []cdxProperty{{Name: "kiln:go_sum", Value: kilnSum}}) {
		t.Errorf("kiln tool %+v, want version v1.2.3, its purl, and its sum as hash and property", kiln)
	}

	// No tags; a development kiln with no sum: no tag property, a purl
	// without version, and no hash.
	data, err = SBOM(bin, sum, withoutTags(facts), Tool{Version: "devel"})
	if err != nil {
		t.Fatal(err)
	}
	d = decodeSBOM(t, data)
	if v, ok := property(d.Metadata.Component, "kiln:build_tags"); ok {
		t.Errorf("kiln:build_tags = %q written for a build without tags", v)
	}
	kiln = d.Metadata.Tools.Components[0]
	if kiln.Version != "devel" || kiln.Purl != "pkg:golang/github.com/kilnworks/kiln" || kiln.Hashes != nil || kiln.Properties != nil {
		t.Errorf("development kiln tool %+v, want a purl without version and no hash", kiln)
	}
}

// A manifest that names kiln's sum (kiln reached through a directory
// replace, so build info has none) and no Go version: the written
// manifest takes the binary's Go version, and the SBOM and provenance
// carry kiln's sum.
func TestWriteArtifactsCompletesTheManifest(t *testing.T) {
	bin, _, facts := sampleFacts(t)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	m, err := manifest.Decode(sampleManifest)
	if err != nil {
		t.Fatal(err)
	}
	kilnSum := facts.Modules[0].Sum
	m.GoVersion, m.KilnSum = "", kilnSum
	embedded, err := manifest.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	written, err := WriteArtifacts(bin, embedded)
	if err != nil {
		t.Fatal(err)
	}
	if written.GoVersion == "" || written.GoVersion != facts.GoVersion {
		t.Errorf("manifest go_version %q, want the binary's %q", written.GoVersion, facts.GoVersion)
	}
	onDisk, err := os.ReadFile(bin + ManifestSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := manifest.Decode(onDisk); err != nil || d.GoVersion != facts.GoVersion {
		t.Errorf("%s go_version: %v %v", ManifestSuffix, d, err)
	}
	prov, _ := os.ReadFile(bin + ProvenanceSuffix)
	if v := decodeProvenance(t, prov).Predicate.RunDetails.Builder.Version; v["kiln_sum"] != kilnSum {
		t.Errorf("provenance builder version %v, want kiln_sum %s", v, kilnSum)
	}
	sbom, _ := os.ReadFile(bin + SBOMSuffix)
	if v, _ := property(decodeSBOM(t, sbom).Metadata.Tools.Components[0], "kiln:go_sum"); v != kilnSum {
		t.Errorf("SBOM kiln:go_sum %q, want %s", v, kilnSum)
	}

	// A Go version the manifest already names is kept.
	m.GoVersion = "go1.0-generator"
	if embedded, err = manifest.Encode(m); err != nil {
		t.Fatal(err)
	}
	if written, err = WriteArtifacts(bin, embedded); err != nil || written.GoVersion != "go1.0-generator" {
		t.Errorf("manifest go_version %q (%v), want the generator's go1.0-generator", written.GoVersion, err)
	}
}

// withKilnSum fills in only kiln's missing sum, on a copy.
func TestWithKilnSum(t *testing.T) {
	const sum = "h1:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	facts := &BuildFacts{Modules: []Module{
		{Path: "example.com/other", Version: "v1.0.0"},
		{Path: manifest.ModulePath, Version: "v0.0.0"},
	}}
	got := withKilnSum(facts, sum)
	if got.Modules[1].Sum != sum {
		t.Errorf("kiln module %+v, want sum %s", got.Modules[1], sum)
	}
	if got.Modules[0].Sum != "" {
		t.Errorf("another module got kiln's sum: %+v", got.Modules[0])
	}
	if facts.Modules[1].Sum != "" {
		t.Error("withKilnSum changed the build facts it was given")
	}
	if withKilnSum(facts, "") != facts {
		t.Error("no sum: the facts should be returned as they are")
	}
	own := &BuildFacts{Modules: []Module{{Path: manifest.ModulePath, Version: "v1.0.0", Sum: "h1:own"}}}
	if got := withKilnSum(own, sum); got.Modules[0].Sum != "h1:own" {
		t.Errorf("kiln's own sum replaced: %+v", got.Modules[0])
	}
}

// A file can be two kinds of input (a schema that is also a prompt): the
// provenance lists inputs by path and, within one path, in the manifest's
// order, whatever the number of inputs.
func TestProvenanceInputOrder(t *testing.T) {
	bin, sum, facts := sampleFacts(t)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	var inputs []manifest.Input
	for _, p := range []string{"z.toml", "y.toml", "x.toml", "w.toml", "v.toml", "u.toml", "t.toml", "s.toml", "r.toml", "q.toml", "p.toml", "o.toml"} {
		inputs = append(inputs, manifest.Input{Path: p, Kind: "child", SHA256: strings.Repeat("0", 64)})
	}
	inputs = append(inputs,
		manifest.Input{Path: "b.json", Kind: "schema", SHA256: strings.Repeat("1", 64)},
		manifest.Input{Path: "b.json", Kind: "prompt", SHA256: strings.Repeat("1", 64)},
		manifest.Input{Path: "a.md", Kind: "prompt", SHA256: strings.Repeat("2", 64)},
		manifest.Input{Path: "a.md", Kind: "schema", SHA256: strings.Repeat("2", 64)},
	)
	data, err := Provenance(bin, sum, facts, ProvenanceInfo{Workflow: "hello", Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range decodeProvenance(t, data).Predicate.BuildDefinition.ResolvedDependencies[:len(inputs)] {
		got = append(got, d.Name+"/"+d.Annotations["kind"])
	}
	want := []string{"a.md/prompt", "a.md/schema", "b.json/schema", "b.json/prompt",
		"o.toml/child", "p.toml/child", "q.toml/child", "r.toml/child", "s.toml/child", "t.toml/child",
		"u.toml/child", "v.toml/child", "w.toml/child", "x.toml/child", "y.toml/child", "z.toml/child"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolved inputs\n got %v\nwant %v", got, want)
	}
}
