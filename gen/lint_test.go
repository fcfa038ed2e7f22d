package gen_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// lintWorkflow writes a workflow (and its files) into a temporary folder,
// loads it and returns its warnings.
func lintWorkflow(t *testing.T, toml string, files map[string]string) []gen.Warning {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		writeFile(t, filepath.Join(dir, name), []byte(data))
	}
	path := filepath.Join(dir, "workflow.toml")
	writeFile(t, path, []byte(toml))
	wf, err := gen.Load(path, gen.LoadOptions{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return gen.Lint(wf)
}

const lintHead = `name = "lint"

[[start_nodes]]
name = "main"
source = "manual"
`

const lintLLM = `
[[nodes]]
id = "review"
type = "llm_infer"
backend = "default"
prompt = "verdict?"
input_from = "trigger"
output_schema = "verdict.json"

[[nodes]]
id = "decide"
type = "switch"
expr = "review.parsed.verdict"

[[nodes]]
id = "ok"
type = "terminate"

[[edges]]
from = "review"
to = "decide"

[[edges]]
from = "decide"
to = "ok"
when = "approve"
`

const verdictSchema = `{"type":"object","required":["verdict"],
 "properties":{"verdict":{"enum":["approve","reject","defer"]}}}`

// TestLintSwitchOnEnum: each enum value of the llm_infer output schema that
// has no edge is one warning naming the value; a covered enum warns nothing.
func TestLintSwitchOnEnum(t *testing.T) {
	ws := lintWorkflow(t, lintHead+lintLLM, map[string]string{"verdict.json": verdictSchema})
	if len(ws) != 2 {
		t.Fatalf("warnings %v, want two (defer, reject)", ws)
	}
	for i, v := range []string{"defer", "reject"} {
		if ws[i].Code != gen.WarnSwitchEnum || !strings.Contains(ws[i].Message, `"`+v+`"`) || !strings.Contains(ws[i].Message, "verdict.json") || !strings.Contains(ws[i].Message, `"decide"`) {
			t.Errorf("warning %d = %+v, want %s naming %q, the schema and the node", i, ws[i], gen.WarnSwitchEnum, v)
		}
	}
	covered := lintHead + lintLLM + `
[[edges]]
from = "decide"
to = "ok2"
when = "reject"

[[edges]]
from = "decide"
to = "ok3"
when = "defer"

[[nodes]]
id = "ok2"
type = "terminate"

[[nodes]]
id = "ok3"
type = "terminate"
`
	if ws := lintWorkflow(t, covered, map[string]string{"verdict.json": verdictSchema}); len(ws) != 0 {
		t.Errorf("every enum value has an edge, yet warnings %v", ws)
	}
}

// TestLintSwitchUnknownValue: a switch on a value of unknown range warns
// once, listing the labels it handles.
func TestLintSwitchUnknownValue(t *testing.T) {
	wf := lintHead + `
[[nodes]]
id = "route"
type = "switch"
expr = "trigger.kind"

[[nodes]]
id = "a"
type = "terminate"

[[edges]]
from = "route"
to = "a"
when = "alpha"
`
	ws := lintWorkflow(t, wf, nil)
	if len(ws) != 1 || ws[0].Code != gen.WarnSwitchValue || !strings.Contains(ws[0].Message, `"alpha"`) || !strings.Contains(ws[0].Message, "trigger.kind") {
		t.Fatalf("warnings %v, want one %s naming trigger.kind and \"alpha\"", ws, gen.WarnSwitchValue)
	}
}

// TestLintCondition: a condition missing its false edge warns; with both
// edges it does not.
func TestLintCondition(t *testing.T) {
	base := lintHead + `
[[nodes]]
id = "check"
type = "condition"
expr = "trigger.go"

[[nodes]]
id = "yes"
type = "terminate"

[[edges]]
from = "check"
to = "yes"
when = "true"
`
	ws := lintWorkflow(t, base, nil)
	if len(ws) != 1 || ws[0].Code != gen.WarnConditionBranch || !strings.Contains(ws[0].Message, `"false"`) {
		t.Fatalf("warnings %v, want one %s for \"false\"", ws, gen.WarnConditionBranch)
	}
	both := base + `
[[nodes]]
id = "no"
type = "fail"

[[edges]]
from = "check"
to = "no"
when = "false"
`
	if ws := lintWorkflow(t, both, nil); len(ws) != 0 {
		t.Errorf("both branches handled, yet warnings %v", ws)
	}
}

// TestLintCodesDocumented: every warning code is listed in
// docs/validation-codes.md.
func TestLintCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "validation-codes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{gen.WarnConditionBranch, gen.WarnSwitchValue, gen.WarnSwitchEnum} {
		if !strings.Contains(string(doc), "`"+c+"`") {
			t.Errorf("warning code %s is not in docs/validation-codes.md", c)
		}
	}
}
