package sealed

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// verifiable returns a workflow tree (root and one child, one asset) with
// its sources registered, and the manifest the generator would embed.
func verifiable(t *testing.T, tag string) (*workflow.Workflow, *manifest.Manifest, []byte) {
	t.Helper()
	rootSrc := []byte("name = \"root-" + tag + "\"\n")
	childSrc := []byte("name = \"child-" + tag + "\"\n")
	schema := []byte(`{"type":"object","title":"` + tag + `"}`)
	child := &workflow.Workflow{Name: "child-" + tag, Digest: digest(childSrc)}
	wf := &workflow.Workflow{
		Name:     "root-" + tag,
		Digest:   digest(rootSrc),
		Nodes:    []workflow.Node{{ID: "sub", Type: "call", Workflow: "child.toml"}},
		Children: map[string]*workflow.Workflow{"child.toml": child},
		Assets:   map[string][]byte{"schema.json": schema},
	}
	RegisterSource(wf.Digest, rootSrc)
	RegisterSource(child.Digest, childSrc)
	tables, err := manifest.TablesDigest(wf)
	if err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{
		Schema:       manifest.Schema,
		Workflow:     manifest.Workflow{Name: wf.Name, Digest: wf.Digest},
		TablesSHA256: tables,
		Inputs: []manifest.Input{
			{Path: "workflow.toml", Kind: "workflow", SHA256: wf.Digest},
			{Path: "child.toml", Kind: "child", SHA256: child.Digest},
			{Path: "schema.json", Kind: "schema", SHA256: digest(schema)},
		},
	}
	return wf, m, rootSrc
}

func TestVerifyPasses(t *testing.T) {
	wf, m, _ := verifiable(t, "ok")
	var out bytes.Buffer
	if err := verify(&out, wf, m); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "2 embedded workflow source(s) match") || !strings.Contains(out.String(), "all 3 manifest inputs") {
		t.Fatalf("report:\n%s", out.String())
	}
	// Through Run, as `BIN verify`.
	data, _ := manifest.Encode(m)
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"verify"}, wf, []byte(manifest.Wrap(data)), Options{Stdout: &stdout, Stderr: &stderr}); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}

func TestVerifyRefuses(t *testing.T) {
	cases := []struct {
		name string
		edit func(wf *workflow.Workflow, m *manifest.Manifest, src []byte)
		want string
	}{
		{"changed source byte", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			bad := bytes.Clone(src)
			bad[1] ^= 0x20
			RegisterSource(wf.Digest, bad)
		}, "embedded workflow source hashes to"},
		{"changed table", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			wf.Nodes[0].ID = "suB"
		}, "static tables hash to"},
		{"changed child table", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			wf.Children["child.toml"].Description = "x"
		}, "static tables hash to"},
		{"changed asset", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			wf.Assets["schema.json"] = []byte("{}")
		}, "static tables hash to"},
		{"no tables digest", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			m.TablesSHA256 = ""
		}, "no tables_sha256"},
		{"input not embedded", func(wf *workflow.Workflow, m *manifest.Manifest, src []byte) {
			m.Inputs[2].SHA256 = strings.Repeat("0", 64)
		}, "manifest input schema.json (schema, sha256 0000"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wf, m, src := verifiable(t, "case"+string(rune('a'+i)))
			tc.edit(wf, m, src)
			var out bytes.Buffer
			err := verify(&out, wf, m)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(out.String(), "FAIL ") {
				t.Fatalf("got %v, want %q\n%s", err, tc.want, out.String())
			}
		})
	}
	// Through Run: exit 5, the reason on stderr.
	wf, m, _ := verifiable(t, "run")
	wf.Nodes[0].Type = "shell_run"
	data, _ := manifest.Encode(m)
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"verify"}, wf, []byte(manifest.Wrap(data)), Options{Stdout: &stdout, Stderr: &stderr}); code != 5 || !strings.Contains(stderr.String(), "static tables hash to") {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
}
