package gen_test

import (
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// parse_json decodes with jsontext, whose package initialisation would
// weigh on every binary linking the data family (hello renders a
// template): the kind lives in its own package (catalog KindPackages),
// which only programs using parse_json import.
const (
	jsonExperimentModule = "github.com/go-json-experiment/json"
	parseJSONPackage     = "github.com/kilnworks/kiln/capabilities/data/parsejson"
)

// parseJSONWorkflow parses trigger.raw and picks user.name from it.
const parseJSONWorkflow = `name = "parse"

[[nodes]]
id = "body"
type = "parse_json"
input_from = "trigger.raw"

[[nodes]]
id = "name"
type = "json_select"
input_from = "body.parsed"
path = "user.name"

[[edges]]
from = "body"
to = "name"
`

func writeParseJSONWorkflow(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workflow.toml")
	writeFile(t, path, []byte(parseJSONWorkflow))
	return path
}

// TestParseJSONLinkedOnlyWhenUsed: hello (template_render, no parse_json)
// links neither the parse_json package nor the JSON module; a workflow
// using parse_json links both.
func TestParseJSONLinkedOnlyWhenUsed(t *testing.T) {
	hello := deps(t, load(t, helloWorkflow(t), false))
	if !linksAny(hello, "github.com/kilnworks/kiln/capabilities/data") {
		t.Fatalf("hello does not link the data family: the check below would prove nothing")
	}
	parse := deps(t, load(t, writeParseJSONWorkflow(t), false))
	for _, p := range []string{jsonExperimentModule, parseJSONPackage} {
		if linksAny(hello, p) {
			t.Errorf("hello links %s", p)
		}
		if !linksAny(parse, p) {
			t.Errorf("positive control: a parse_json workflow does not link %s", p)
		}
	}
}

// linksJSONExperiment reports whether the sealed binary at bin lists the
// JSON module in its build info and holds any function of it.
func linksJSONExperiment(t *testing.T, bin string) (module, funcs bool) {
	t.Helper()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	module = slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == jsonExperimentModule })
	for f := range funcNames(t, bin) {
		if strings.HasPrefix(f, jsonExperimentModule+"/") || strings.HasPrefix(f, parseJSONPackage+".") {
			return module, true
		}
	}
	return module, false
}

// TestSealedParseJSON: the sealed hello holds nothing of the JSON module;
// the sealed binary of a parse_json workflow links it and parses: numbers
// as written, an invalid document and one nested too deep refused with
// the reasons the engine gives.
func TestSealedParseJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two sealed binaries")
	}
	if mod, funcs := linksJSONExperiment(t, helloBinary(t).Binary); mod || funcs {
		t.Errorf("sealed hello links %s: module %v, functions %v", jsonExperimentModule, mod, funcs)
	}
	res, err := gen.Build(context.Background(), gen.BuildOptions{
		Workflow: writeParseJSONWorkflow(t), Output: filepath.Join(t.TempDir(), "parse"), KilnSource: repoRoot(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if mod, funcs := linksJSONExperiment(t, res.Binary); !mod || !funcs {
		t.Fatalf("positive control: the parse_json binary does not link %s: module %v, functions %v", jsonExperimentModule, mod, funcs)
	}
	run := func(raw string) map[string]any {
		t.Helper()
		input := filepath.Join(t.TempDir(), "input.json")
		data, err := json.Marshal(map[string]string{"raw": raw})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, input, data)
		stdout, err := exec.Command(res.Binary, "--input", input, "--quiet").Output()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		var outcome map[string]any
		if err := json.Unmarshal(stdout, &outcome); err != nil {
			t.Fatalf("%.40s: outcome %s (%v)", raw, stdout, err)
		}
		return outcome
	}
	out := run(`{"user":{"name":"Ada","age":36.0}}`)
	if out["status"] != "completed" || out["last_node"] != "name" {
		t.Fatalf("outcome %v", out)
	}
	for raw, reason := range map[string]string{
		`{"user":`: `node body (parse_json): input_from "trigger.raw" is not valid JSON: `,
		strings.Repeat("[", 65) + strings.Repeat("]", 65): `node body (parse_json): input_from "trigger.raw" is not valid JSON: JSON nesting deeper than 64 (at byte 64)`,
	} {
		out := run(raw)
		got, _ := out["error"].(string)
		if out["status"] != "errored" || !strings.HasPrefix(got, reason) {
			t.Errorf("%.40s: outcome %v, want errored with %q", raw, out, reason)
		}
	}
}
