package http

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

func discoverySchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "schemas", name))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, os.ErrNotExist }
	if err := c.AddResource(name, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDiscoveryEndpoints fetches kiln's document over real HTTP and checks
// it against its JSON Schema and the degraded projection (the OpenWOP
// documents: openwop_test.go).
func TestDiscoveryEndpoints(t *testing.T) {
	ds := discoverySchema(t, "discovery.schema.json")
	for _, tc := range []struct {
		requires string
		degraded []any
	}{
		{"", nil},
		{`requires_capabilities = ["serve.http", "host.workspace"]`, []any{"host.workspace"}},
	} {
		ts := start(t, tc.requires+"\n"+wf("echo", ""), setup{})
		for _, c := range []struct {
			path   string
			schema *jsonschema.Schema
		}{{"/.well-known/kiln", ds}} {
			r := ts.do(t, "GET", c.path, "").expect(t, 200)
			var doc any
			if err := json.Unmarshal([]byte(r.body), &doc); err != nil {
				t.Fatal(err)
			}
			if err := c.schema.Validate(doc); err != nil {
				t.Fatalf("%s does not match its schema: %v\n%s", c.path, err, r.body)
			}
			m := doc.(map[string]any)
			got, _ := m["degraded"].([]any)
			lim := m["limits"].(map[string]any)
			if lim["max_node_executions"].(float64) != 10000 || lim["max_request_body_bytes"].(float64) != MaxBodyBytes {
				t.Fatalf("limits = %v", lim)
			}
			if _, ok := m["capabilities"].(map[string]any)["http"]; !ok {
				t.Fatalf("http family not advertised: %s", r.body)
			}
			if !reflect.DeepEqual(got, tc.degraded) {
				t.Fatalf("%s degraded = %v, want %v", c.path, got, tc.degraded)
			}
		}
	}
}
