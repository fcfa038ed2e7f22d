package rego_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/testtool"
)

const opaModule = "github.com/open-policy-agent/opa"

// sealedWorkflow reads the file the trigger names under a static
// allowlist of dir; rego adds the reference's policy on dir/data/safe/.
func sealedWorkflow(dir string, rego bool) string {
	wf := fmt.Sprintf(`name = "rego-sealed"

[[start_nodes]]
name = "main"
source = "manual"

[[nodes]]
id = "load"
type = "read_file"
path_from = "trigger.path"

[policy.fs]
read = [%q]
`, dir+"/data/**")
	if rego {
		wf += fmt.Sprintf("\n[policy.rego]\nfile = \"policy.rego\"\ndata = { safe_prefix = %q }\n", dir+"/data/safe/")
	}
	return wf
}

// TestSealedLinksOPAOnlyWithRego builds the same workflow sealed with and
// without [policy.rego], and hello: only the first links OPA (go version
// -m lists the module), its manifest lists the rego family and the policy
// file with its digest, and the sealed binary enforces the policy. The
// log gives the size the family adds.
func TestSealedLinksOPAOnlyWithRego(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three sealed binaries")
	}
	root := testtool.RepoRoot(t)
	dir := tempDir(t)
	writeFile(t, dir+"/data/safe/report.txt", "safe")
	writeFile(t, dir+"/data/private/keys.txt", "secret")
	writeFile(t, dir+"/rego/workflow.toml", sealedWorkflow(dir, true))
	writeFile(t, dir+"/rego/policy.rego", ReferencePolicy)
	writeFile(t, dir+"/plain/workflow.toml", sealedWorkflow(dir, false))

	build := func(workflow, out string) *gen.BuildResult {
		t.Helper()
		res, err := gen.Build(context.Background(), gen.BuildOptions{Workflow: workflow, Output: out, KilnSource: root})
		if err != nil {
			t.Fatalf("build %s: %v", workflow, err)
		}
		return res
	}
	withRego := build(dir+"/rego/workflow.toml", dir+"/bin/rego")
	plain := build(dir+"/plain/workflow.toml", dir+"/bin/plain")
	hello := build(filepath.Join(root, "examples", "hello", "workflow.toml"), dir+"/bin/hello")

	for _, c := range []struct {
		res  *gen.BuildResult
		want bool
	}{{withRego, true}, {plain, false}, {hello, false}} {
		out, err := exec.Command("go", "version", "-m", c.res.Binary).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m: %v\n%s", err, out)
		}
		if got := bytes.Contains(out, []byte("\tdep\t"+opaModule+"\t")); got != c.want {
			t.Errorf("%s links %s: %v, want %v\n%s", filepath.Base(c.res.Binary), opaModule, got, c.want, out)
		}
		if got := slices.Contains(c.res.Plan.Families, "rego"); got != c.want {
			t.Errorf("%s: families %v", filepath.Base(c.res.Binary), c.res.Plan.Families)
		}
	}

	// The policy file is an input of the manifest with its digest: the
	// seal check holds the embedded copy to it at every start.
	sum := sha256.Sum256([]byte(ReferencePolicy))
	found := false
	for _, in := range withRego.Plan.Manifest.Inputs {
		found = found || in.Path == "policy.rego" && in.Kind == "policy" && in.SHA256 == hex.EncodeToString(sum[:])
	}
	if !found {
		t.Errorf("manifest inputs lack policy.rego with its digest: %+v", withRego.Plan.Manifest.Inputs)
	}

	// The sealed binary enforces the compiled-in policy.
	run := func(path string) (string, string) {
		input := filepath.Join(dir, "input.json")
		writeFile(t, input, fmt.Sprintf(`{"path": %q}`, path))
		cmd := exec.Command(withRego.Binary, "--input", input)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run() // a denied run exits non-zero
		var outcome map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &outcome); err != nil {
			t.Fatalf("sealed run: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
		}
		status, _ := outcome["status"].(string)
		return status, stderr.String()
	}
	if status, stderr := run(dir + "/data/safe/report.txt"); status != "completed" {
		t.Errorf("sealed read under the safe prefix: %s\n%s", status, stderr)
	}
	if status, stderr := run(dir + "/data/private/keys.txt"); status != "errored" ||
		!strings.Contains(stderr, "msg=policy.denied") || !strings.Contains(stderr, "source=rego") {
		t.Errorf("sealed read outside the safe prefix: %s\n%s", status, stderr)
	}

	t.Logf("sealed sizes: with [policy.rego] %d bytes (%.2f MiB), same workflow without %d bytes (%.2f MiB): the rego family adds %d bytes (%.2f MiB); hello %d bytes",
		withRego.Size, mib(withRego.Size), plain.Size, mib(plain.Size), withRego.Size-plain.Size, mib(withRego.Size-plain.Size), hello.Size)
	for _, b := range []string{withRego.Binary, plain.Binary, hello.Binary} {
		os.Remove(b)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
