// Package openwoptest compiles the published OpenWOP JSON Schemas for the
// tests that check kiln's OpenWOP documents (docs/openwop.md). The schemas
// are not copied into the repository: they are read from ../shared/openwop
// beside the repository root. Only tests import this package.
package openwoptest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/testtool"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The schemas' $id base; each file is registered under its own $id.
const base = "https://openwop.dev/spec/v1/"

// The published schemas kiln's documents must validate against.
const (
	Capabilities   = "capabilities.schema.json"
	AgentInventory = "agent-inventory-response.schema.json"
	AgentManifest  = "agent-manifest.schema.json"
)

// standIns are the files capabilities.schema.json references only inside
// its optional prompts block; they are not published beside it, and kiln
// advertises no prompts block, so they accept anything.
var standIns = []string{"prompt-kind.schema.json", "prompt-ref.schema.json"}

// Dir returns the folder holding the shared schemas. It skips the test
// when the folder is absent, or fails it when CI=true.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(testtool.RepoRoot(t)), "shared", "openwop")
	if _, err := os.Stat(filepath.Join(dir, Capabilities)); err != nil {
		testtool.Missing(t, "the OpenWOP schemas are not at %s (%v)", dir, err)
	}
	return dir
}

// Compile compiles the named shared schema (draft 2020-12), resolving
// every $ref to the local files by $id; nothing is fetched.
func Compile(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	dir := Dir(t)
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(url string) (_ io.ReadCloser, err error) {
		return nil, errors.New("no network: " + url + " is not a local OpenWOP schema")
	}
	for _, f := range []string{Capabilities, AgentInventory, AgentManifest} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(base+f, bytes.NewReader(data)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, f := range standIns {
		if err := c.AddResource(base+f, strings.NewReader("{}")); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile(base + name)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return s
}
