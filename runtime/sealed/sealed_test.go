package sealed_test

import (
	"bytes"
	"context"
	"encoding/json"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/sealed"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// A node kind of this test only, so the test links no capability family.
func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "sealedtest_answer", Family: "sealedtest",
		Prepare: func(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
			return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
				return runtime.Next(map[string]any{"answer": json.Number("42")}), nil
			}, nil
		}})
}

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func fixture(goVersion string) (*workflow.Workflow, []byte, []byte) {
	wf := &workflow.Workflow{
		Name:   "answer",
		Digest: digest,
		Nodes:  []workflow.Node{{ID: "a", Type: "sealedtest_answer"}},
	}
	m := &manifest.Manifest{
		Schema: manifest.Schema, Workflow: manifest.Workflow{Name: "answer", Digest: digest},
		KilnVersion: "v9.9.9", GoVersion: goVersion, BuildTags: []string{"kiln_custom", "kiln_control"},
		Families:  []manifest.Family{{ID: "control", Package: "github.com/kilnworks/kiln/capabilities/control", Tag: "kiln_control"}},
		NodeKinds: []string{"sealedtest_answer"},
	}
	raw, err := manifest.Encode(m)
	if err != nil {
		panic(err)
	}
	return wf, raw, []byte(manifest.Wrap(raw))
}

func run(t *testing.T, wf *workflow.Workflow, blob []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := sealed.Run(args, wf, blob, sealed.Options{Prog: "answer", Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestManifestSubcommand(t *testing.T) {
	wf, raw, blob := fixture("go1.99")
	code, out, _ := run(t, wf, blob, "manifest")
	if code != 0 || out != string(raw) {
		t.Fatalf("manifest: exit %d, printed\n%s\nwant the embedded bytes\n%s", code, out, raw)
	}
	// Generated without a build, the binary reports its own toolchain.
	wf, _, blob = fixture("")
	code, out, _ = run(t, wf, blob, "manifest")
	m, err := manifest.Decode([]byte(out))
	if code != 0 || err != nil || m.GoVersion != goruntime.Version() || m.Workflow.Name != "answer" {
		t.Fatalf("manifest without go_version: exit %d, %v, %+v", code, err, m)
	}
	if code, _, stderr := run(t, wf, blob, "manifest", "extra"); code != 2 || !strings.Contains(stderr, "no arguments") {
		t.Errorf("manifest extra: exit %d, %q", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	wf, _, blob := fixture("go1.99")
	code, out, _ := run(t, wf, blob, "--version")
	for _, want := range []string{"workflow answer", "sha256 " + digest, "kiln v9.9.9", "go1.99", "families control"} {
		if !strings.Contains(out, want) {
			t.Errorf("--version = %q, missing %q", out, want)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestRefusesMismatchedManifest(t *testing.T) {
	wf, _, blob := fixture("go1.99")
	wf.Digest = strings.Repeat("f", 64) // tables no longer match the manifest
	code, out, stderr := run(t, wf, blob)
	if code != 2 || out != "" || !strings.Contains(stderr, "embedded manifest describes workflow") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	wf, _, _ = fixture("go1.99")
	if code, _, stderr := run(t, wf, []byte("not a blob")); code != 2 || !strings.Contains(stderr, "malformed") {
		t.Errorf("bad blob: exit %d, %q", code, stderr)
	}
}

func TestRunsThroughTheCLI(t *testing.T) {
	wf, _, blob := fixture("go1.99")
	code, out, stderr := run(t, wf, blob, "--quiet")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not the outcome JSON: %q (stderr %q)", out, stderr)
	}
	if code != 0 || got["status"] != "completed" || got["last_node"] != "a" {
		t.Errorf("exit %d, outcome %v", code, got)
	}
	if fv, _ := got["final_value"].(map[string]any); fv["answer"] != float64(42) {
		t.Errorf("final_value = %v", got["final_value"])
	}
	// A sealed binary runs only its own workflow.
	code, _, stderr = run(t, wf, blob, "--config", "other.toml")
	if code != 2 || !strings.Contains(stderr, "--config") {
		t.Errorf("--config: exit %d, %q", code, stderr)
	}
}

func TestSources(t *testing.T) {
	sealed.RegisterSource("d1", []byte("name = 'x'"))
	if b, ok := sealed.Source("d1"); !ok || string(b) != "name = 'x'" {
		t.Errorf("Source = %q %v", b, ok)
	}
	if _, ok := sealed.Source("nope"); ok {
		t.Error("unknown digest found")
	}
}
