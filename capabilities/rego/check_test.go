package rego_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const checkWorkflow = `name = "check"

[[nodes]]
id = "done"
type = "terminate"

[policy.rego]
file = "policy.rego"
`

// load loads dir/workflow.toml as kiln check does and returns its issues
// (code: message).
func load(t *testing.T, dir string) []string {
	t.Helper()
	_, err := gen.Load(dir+"/workflow.toml", gen.LoadOptions{})
	var ve *gen.ValidationError
	if err == nil {
		return nil
	}
	if !errors.As(err, &ve) {
		t.Fatalf("load: %v", err)
	}
	var out []string
	for _, is := range ve.Issues {
		out = append(out, is.Code+": "+is.Message)
	}
	return out
}

// TestCheckPolicyFile: kiln check reads the policy file beside the
// workflow and reports its problems with the file's line; a missing file
// is file_not_found. The same policy is refused at start-up (runtime.Compile)
// with the same message, before any request.
func TestCheckPolicyFile(t *testing.T) {
	dir := tempDir(t)
	writeFile(t, dir+"/workflow.toml", checkWorkflow)
	if got := load(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], "file_not_found: [policy.rego]: ") {
		t.Fatalf("missing file: %v", got)
	}

	bad := "package agent\n\n# lookups are not decisions\nallow if {\n\tcount(net.lookup_ip_addr(input.args.url)) > 0\n}\n"
	writeFile(t, dir+"/policy.rego", bad)
	want := "rego_builtin_refused: [policy.rego]: policy.rego:5: net.lookup_ip_addr is refused"
	if got := load(t, dir); len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("issues %v, want %q", got, want)
	}
	wf := &workflow.Workflow{Name: "check", Nodes: []workflow.Node{{ID: "done", Type: "terminate"}},
		Policy: &workflow.Policy{Rego: &workflow.RegoPolicy{File: "policy.rego"}}, Assets: map[string][]byte{"policy.rego": []byte(bad)}}
	if _, err := runtime.Compile(wf, runtime.CompileOptions{}); err == nil || !strings.Contains(err.Error(), "policy.rego:5: net.lookup_ip_addr is refused") {
		t.Fatalf("start-up: %v", err)
	}

	writeFile(t, dir+"/policy.rego", ReferencePolicy)
	if got := load(t, dir); len(got) != 0 {
		t.Fatalf("the reference policy: %v", got)
	}
}
