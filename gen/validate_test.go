package gen

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// documentedCodes reads the codes listed in docs/validation-codes.md.
func documentedCodes(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/validation-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(data), -1) {
		codes = append(codes, m[1])
	}
	if len(codes) < 60 {
		t.Fatalf("found only %d codes in docs/validation-codes.md", len(codes))
	}
	return codes
}

// loadIssues loads path and returns its issues; it fails the test on a
// parse error or a valid workflow.
func loadIssues(t *testing.T, path string) []Issue {
	t.Helper()
	_, err := Load(path, LoadOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Load(%s): want *ValidationError, got %T %v", path, err, err)
	}
	return ve.Issues
}

// decodeIssues decodes path and validates it without loading anything.
func decodeIssues(t *testing.T, path string) []Issue {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := Decode(path, data)
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := Validate(wf); !errors.As(err, &ve) {
		t.Fatalf("Validate(%s): want *ValidationError, got %v", path, err)
	}
	return ve.Issues
}

func codesOf(issues []Issue) []string {
	var out []string
	for _, is := range issues {
		out = append(out, is.Code)
	}
	return out
}

// validateOnly are codes Load never reports: not_loaded needs Validate
// without Load, and Load's signature check (wfsign.go) refuses a bad
// [signing] block as a parse error before validation. Their cases are
// checked with Decode + Validate.
var validateOnly = map[string]bool{"not_loaded": true, "invalid_signing": true}

// TestValidationCodes: every documented code has a minimal workflow in
// testdata/validate that produces that code and no other.
func TestValidationCodes(t *testing.T) {
	for _, code := range documentedCodes(t) {
		if code == "not_loaded" {
			continue // TestValidateWithoutLoad
		}
		t.Run(code, func(t *testing.T) {
			path := filepath.Join("../testdata/validate", code+".toml")
			if _, err := os.Stat(path); err != nil {
				path = filepath.Join("../testdata/validate", code, "workflow.toml")
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("no testdata/validate/%s.toml or %s/workflow.toml", code, code)
			}
			var issues []Issue
			if validateOnly[code] {
				issues = decodeIssues(t, path)
			} else {
				issues = loadIssues(t, path)
			}
			for _, is := range issues {
				if is.Code != code {
					t.Errorf("unexpected extra issue %s: %s", is.Code, is.Message)
				}
				if strings.TrimSpace(is.Message) == "" {
					t.Errorf("issue %s has no message", is.Code)
				}
			}
			if !slices.Contains(codesOf(issues), code) {
				t.Errorf("want code %s, got %v", code, issues)
			}
		})
	}
}

// TestIssueMessages pins what a few messages say: node id and kind, the
// offending value, and where a child's issue came from.
func TestIssueMessages(t *testing.T) {
	cases := []struct {
		file string
		want []string // substrings of one issue each, in order
	}{
		{"field_not_allowed.toml", []string{`node "load" (read_file): template does not apply here`}},
		{"missing_field.toml", []string{`node "load" (read_file): path_from is required`}},
		{"unknown_backend.toml", []string{`node "ask" (llm_infer): backend "gpt" is not declared`}},
		{"invalid_retry.toml", []string{"max_attempts must be at least 1", `retry.on must be "any" or "transient", got "sometimes"`, "jitter must be within 0.0..1.0, got 1.5"}},
		{"unknown_start_node.toml", []string{`route POST /hook: start_node "wbe"`, `triggers[0] (interval): start_node "tick"`}},
		{"cycle.toml", []string{"nodes b, c form a cycle"}},
		{"ambiguous_entry.toml", []string{"2 nodes have no in-edges (a, b)"}},
		{"child_parse_error.toml", []string{`node "split" (parallel): child workflow "bad-child.toml": ../testdata/validate/bad-child.toml:7: nodes[0].colour: unknown key "colour"`}},
		{"child_depth_exceeded/workflow.toml", []string{`node "down" (call): child workflow "c1.toml" nests 9 levels of workflows; the limit is 8`}},
		{"schema_remote_ref.toml", []string{`https://schemas.example.com/address.json is not allowed`}},
		{"invalid_cron.toml", []string{`schedule "*/5 * * *": want 5 fields`}},
		{"unknown_auth_binding.toml", []string{`auth "bearer" needs an [auth.bearer.default] binding`}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			issues := loadIssues(t, filepath.Join("../testdata/validate", tc.file))
			if len(issues) != len(tc.want) {
				t.Fatalf("want %d issues, got %d: %v", len(tc.want), len(issues), issues)
			}
			for i, w := range tc.want {
				if !strings.Contains(issues[i].Message, w) {
					t.Errorf("issue %d: %q does not contain %q", i, issues[i].Message, w)
				}
			}
		})
	}
}

// TestChildIssuesKeepCode: an issue inside a child workflow is reported on
// the parent with the child's own code, naming the calling node.
func TestChildIssuesKeepCode(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "parent.toml", `
name = "parent"
[[nodes]]
id = "each"
type = "map"
items_from = "trigger.items"
workflow = "sub/child.toml"
max_items = 3
`)
	write(t, dir, "sub/child.toml", `
name = "child"
[[nodes]]
id = "a"
type = "merge"
[[edges]]
from = "a"
to = "ghost"
`)
	issues := loadIssues(t, filepath.Join(dir, "parent.toml"))
	if len(issues) != 1 || issues[0].Code != "dangling_edge" ||
		!strings.Contains(issues[0].Message, `node "each" (map): child workflow "sub/child.toml": edge 0 (a -> ghost): to "ghost" is not a declared node`) {
		t.Fatalf("got %v", issues)
	}
}

// TestCollectsEveryIssue: one workflow with many problems reports each.
func TestCollectsEveryIssue(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "wf.toml", `
name = "many"
[[nodes]]
id = "a"
type = "respond"
status = 42
body_template = "x"
[[nodes]]
id = "a"
type = "map"
items_from = "trigger.items"
workflow = "nope.toml"
max_items = 0
[[edges]]
from = "a"
to = "b"
`)
	got := codesOf(loadIssues(t, filepath.Join(dir, "wf.toml")))
	want := []string{"respond_status", "duplicate_node_id", "map_bounds", "child_not_found", "dangling_edge"}
	if !slices.Equal(got, want) {
		t.Fatalf("codes = %v, want %v", got, want)
	}
}

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestValidateWithoutLoad: Validate reads nothing, so declared children
// and files that were never loaded are issues, not silently skipped.
func TestValidateWithoutLoad(t *testing.T) {
	wf, err := Decode("x.toml", []byte(`
name = "x"
[[nodes]]
id = "sub"
type = "call"
workflow = "child.toml"
[[nodes]]
id = "ask"
type = "llm_infer"
backend = "default"
prompt = "p"
output_schema = "s.json"
[[edges]]
from = "sub"
to = "ask"
`))
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := Validate(wf); !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %v", err)
	}
	if got := codesOf(ve.Issues); !slices.Equal(got, []string{"not_loaded", "not_loaded"}) {
		t.Fatalf("codes = %v", got)
	}

	// Supplying what Load would have loaded makes it valid.
	wf.Children = map[string]*workflow.Workflow{"child.toml": {Name: "c", Nodes: []workflow.Node{{ID: "t", Type: "terminate"}}}}
	wf.Assets = map[string][]byte{"s.json": []byte(`{"type":"object"}`)}
	if err := Validate(wf); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}
