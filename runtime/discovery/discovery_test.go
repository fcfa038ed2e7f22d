package discovery

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "schemas", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = func(s string) (r io.ReadCloser, err error) { return nil, os.ErrNotExist }
	if err := c.AddResource(name, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("%s\ninvalid: %v", b, err)
	}
}

func info(requires []string) Info {
	return Info{
		Workflow: &workflow.Workflow{Name: "triage", Digest: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			RequiresCapabilities: requires,
			Budget:               &workflow.Budget{MaxRunTimeSecs: 30, MaxLLMTokens: 5000},
			Edges:                []workflow.Edge{{From: "a", To: "b", MaxIterations: workflow.Int(3)}}},
		Version:        "v0.1.0",
		Families:       map[string][]string{"fs": {"tools.fs"}, "control": {}},
		NodeKinds:      []string{"write_file", "terminate"},
		MaxSteps:       10000,
		MaxRequestBody: 1 << 20,
	}
}

func TestDocumentsMatchSchemas(t *testing.T) {
	ds := compile(t, "discovery.schema.json")
	for _, req := range [][]string{nil, {"tools.fs"}, {"tools.fs", "tools.http", "mcp.tools"}} {
		validate(t, ds, Build(info(req)))
	}
}

func TestDegradedProjection(t *testing.T) {
	full := Build(info([]string{"tools.fs"}))
	if full.Degraded != nil {
		t.Fatalf("all-met document must omit degraded: %+v", full)
	}
	b, _ := json.Marshal(full)
	if bytes.Contains(b, []byte("degraded")) {
		t.Fatalf("degraded key present: %s", b)
	}
	deg := Build(info([]string{"tools.http", "tools.fs", "mcp.tools"}))
	if !reflect.DeepEqual(deg.Degraded, []string{"mcp.tools", "tools.http"}) {
		t.Fatalf("degraded = %v", deg.Degraded)
	}
	// A key required in its OpenWOP form is met by the family providing it.
	in := info([]string{"x-host-kiln-tools-fs", "x-host-kiln-tools-http"})
	in.WireKey = func(k string) string { return "x-host-kiln-" + strings.ReplaceAll(k, ".", "-") }
	if got := Build(in).Degraded; !reflect.DeepEqual(got, []string{"x-host-kiln-tools-http"}) {
		t.Fatalf("degraded with OpenWOP keys = %v", got)
	}
	doc := Build(info([]string{"tools.http"}))
	if !reflect.DeepEqual(doc.Degraded, []string{"tools.http"}) || *doc.Limits.MaxRunDurationMS != 30000 || doc.Limits.MaxLoopIterations != 3 {
		t.Fatalf("%+v", doc)
	}
}

// A loop edge inside a called child workflow bounds the run as much as one
// in the root, so the advertised limit takes the largest of all of them.
func TestMaxLoopIterationsCoversChildren(t *testing.T) {
	in := info(nil)
	seven, two := 7, 2
	child := &workflow.Workflow{Name: "child", Edges: []workflow.Edge{{From: "a", To: "a", MaxIterations: &seven}}}
	grand := &workflow.Workflow{Name: "grand", Edges: []workflow.Edge{{From: "b", To: "b", MaxIterations: &two}}}
	child.Children = map[string]*workflow.Workflow{"grand.toml": grand, "self.toml": child}
	in.Workflow.Children = map[string]*workflow.Workflow{"child.toml": child}
	if got := Build(in).Limits.MaxLoopIterations; got != 7 {
		t.Fatalf("max_loop_iterations = %d, want 7 (from the child)", got)
	}
	delete(in.Workflow.Children, "child.toml")
	if got := Build(in).Limits.MaxLoopIterations; got != 3 {
		t.Fatalf("max_loop_iterations = %d, want the root's 3", got)
	}
}
