package gen

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSeedsDialect: every workflow written in the reference runtime's
// dialect (testdata/seeds-dialect, one file per seed section) loads and
// validates, children and assets included.
func TestSeedsDialect(t *testing.T) {
	files, _ := filepath.Glob("../testdata/seeds-dialect/*.toml")
	if len(files) < 9 {
		t.Fatalf("want at least 9 dialect samples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := Load(f, LoadOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLoadedModel spot-checks what Load puts in the model: wrapped
// documents, children keyed by the path as written, assets, digests.
func TestLoadedModel(t *testing.T) {
	comp, err := Load("../testdata/seeds-dialect/composition.toml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k, c := range comp.Children {
		keys = append(keys, k)
		if c == nil || len(c.Nodes) != 1 || c.Nodes[0].ID != "pick" {
			t.Errorf("child %s not loaded: %+v", k, c)
		}
	}
	slices.Sort(keys)
	want := []string{"workflows/enrich-a.toml", "workflows/enrich-b.toml", "workflows/enrich.toml", "workflows/score-account.toml"}
	if !slices.Equal(keys, want) {
		t.Errorf("children = %v, want %v", keys, want)
	}
	if n := comp.Nodes[1]; n.Type != "parallel" || len(n.Branches) != 2 || n.Branches[1].InputFrom != "trigger" {
		t.Errorf("parallel branches decoded wrong: %+v", n.Branches)
	}
	if m := comp.Nodes[2]; m.MaxItems == nil || *m.MaxItems != 500 || *m.MaxConcurrent != 8 {
		t.Errorf("map bounds decoded wrong: %+v", m)
	}

	intel, err := Load("../testdata/seeds-dialect/intelligence.toml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := os.ReadFile("../testdata/seeds-dialect/schemas/out.json")
	if got := intel.Assets["schemas/out.json"]; !bytes.Equal(got, schema) {
		t.Errorf("asset schemas/out.json = %q", got)
	}
	if _, ok := intel.Assets["inline"]; ok {
		t.Error(`output_schema = "inline" must not be read as a file`)
	}
	if intel.Nodes[0].OutputSchema != "schemas/out.json" {
		t.Error("the model must keep the path as written")
	}

	wrapped, err := Load("../testdata/seeds-dialect/wrapped.toml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wrapped.Name != "wrapped" || len(wrapped.Nodes) != 2 || wrapped.Policy == nil || wrapped.Policy.Env == nil {
		t.Errorf("wrapped workflow decoded wrong: %+v", wrapped)
	}
	if wrapped.Source != "../testdata/seeds-dialect/wrapped.toml" || len(wrapped.Digest) != 64 {
		t.Errorf("source %q digest %q", wrapped.Source, wrapped.Digest)
	}

	ops, err := Load("../testdata/seeds-dialect/operations.toml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := ops.Secrets[3]; s.Source != "oauth2" || s.ClientSecretEnv != "SF_CLIENT_SECRET" || s.ExtraParams["audience"] == "" {
		t.Errorf("oauth2 secret decoded wrong: %+v", s)
	}
	if ops.Logging.OTel.SampleRatio == nil || *ops.Logging.OTel.SampleRatio != 0.25 {
		t.Errorf("otel sample_ratio decoded wrong")
	}
}

// TestRelativePaths: declared paths resolve against the declaring file's
// directory first, then the working directory.
func TestRelativePaths(t *testing.T) {
	root := t.TempDir()
	write(t, root, "shared/child.toml", `
name = "from-cwd"
[[nodes]]
id = "x"
type = "terminate"
`)
	write(t, root, "shared/schema.json", `{"type": "string"}`)
	write(t, root, "flows/sub/child.toml", `
name = "beside"
[[nodes]]
id = "y"
type = "terminate"
`)
	wfPath := write(t, root, "flows/sub/wf.toml", `
name = "parent"
[[nodes]]
id = "a"
type = "call"
workflow = "child.toml"
[[nodes]]
id = "b"
type = "call"
workflow = "shared/child.toml"
[[nodes]]
id = "c"
type = "llm_infer"
backend = "default"
prompt = "p"
output_schema = "shared/schema.json"
[[edges]]
from = "a"
to = "b"
[[edges]]
from = "b"
to = "c"
`)
	t.Chdir(root)
	wf, err := Load(wfPath, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Children["child.toml"].Name; got != "beside" {
		t.Errorf("child.toml resolved to %q, want the file beside the workflow", got)
	}
	if got := wf.Children["shared/child.toml"].Name; got != "from-cwd" {
		t.Errorf("shared/child.toml resolved to %q, want the working-directory fallback", got)
	}
	if string(wf.Assets["shared/schema.json"]) != `{"type": "string"}` {
		t.Errorf("schema asset = %q", wf.Assets["shared/schema.json"])
	}

	// From elsewhere, the working-directory fallback no longer applies.
	t.Chdir(t.TempDir())
	_, err = Load(wfPath, LoadOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || !slices.Equal(codesOf(ve.Issues), []string{"child_not_found", "schema_not_found"}) {
		t.Fatalf("want child_not_found and schema_not_found, got %v", err)
	}
}

// TestSharedChildLoadedOnce: a child declared by two parents is read once
// and shared, and a diamond is not mistaken for a cycle.
func TestSharedChildLoadedOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "leaf.toml", "name = \"leaf\"\n[[nodes]]\nid = \"x\"\ntype = \"terminate\"\n")
	for _, n := range []string{"left", "right"} {
		write(t, dir, n+".toml", "name = \""+n+"\"\n[[nodes]]\nid = \"c\"\ntype = \"call\"\nworkflow = \"leaf.toml\"\n")
	}
	root := write(t, dir, "root.toml", `
name = "root"
[[nodes]]
id = "p"
type = "parallel"
branches = [{ workflow = "left.toml" }, { workflow = "right.toml" }]
`)
	reads := map[string]int{}
	wf, err := load(root, LoadOptions{}, func(p string) ([]byte, error) {
		reads[filepath.Base(p)]++
		return osReadFile(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if reads["leaf.toml"] != 1 {
		t.Errorf("leaf.toml read %d times", reads["leaf.toml"])
	}
	if wf.Children["left.toml"].Children["leaf.toml"] != wf.Children["right.toml"].Children["leaf.toml"] {
		t.Error("the shared child should be one workflow")
	}
}

// TestUnreadableRoot: a missing file is a ParseError naming the file.
func TestUnreadableRoot(t *testing.T) {
	_, err := Load("../testdata/no-such.toml", LoadOptions{})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Error() != "../testdata/no-such.toml: cannot read: no such file or directory" {
		t.Fatalf("got %v", err)
	}
}

// TestExamplesLoad: every example workflow loads and validates.
func TestExamplesLoad(t *testing.T) {
	files, _ := filepath.Glob("../examples/*/workflow.toml")
	if len(files) < 8 {
		t.Fatalf("want at least 8 examples, found %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			if _, err := Load(f, LoadOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
