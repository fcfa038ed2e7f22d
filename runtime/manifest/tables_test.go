package manifest

import (
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

func TestTablesDigest(t *testing.T) {
	tree := func(source string) *workflow.Workflow {
		return &workflow.Workflow{
			Name: "w", Source: source, Digest: "d",
			Children: map[string]*workflow.Workflow{"c.toml": {Name: "c", Source: source + "/c.toml"}},
			Assets:   map[string][]byte{"s.json": []byte("{}")},
		}
	}
	a, err := TablesDigest(tree("/build/one/workflow.toml"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := TablesDigest(tree(""))
	if a != b || len(a) != 64 {
		t.Fatalf("digest depends on where the files were read: %s vs %s", a, b)
	}
	wf := tree("x")
	wf.Children["c.toml"].Description = "changed"
	if c, _ := TablesDigest(wf); c == a {
		t.Fatal("a changed child does not change the digest")
	}
	wf = tree("x")
	wf.Assets["s.json"] = []byte("[]")
	if c, _ := TablesDigest(wf); c == a {
		t.Fatal("a changed asset does not change the digest")
	}
	// The input is not modified.
	wf = tree("keep")
	TablesDigest(wf)
	if wf.Source != "keep" || wf.Children["c.toml"].Source != "keep/c.toml" {
		t.Fatal("TablesDigest changed its input")
	}
}
