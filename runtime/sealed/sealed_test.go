package sealed_test

import (
	"bytes"
	"context"
	"encoding/json"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/cli"
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

// source is the workflow source the fixture registers; digest is its SHA-256.
var source = []byte("name = \"answer\"\n")

const digest = "6f914bebbcfea975ed155fe9b55108b6fc313585e511896042e8743a01504170"

func init() {
	sealed.RegisterSource(digest, source)
}

func fixture(goVersion string) (*workflow.Workflow, []byte, []byte) {
	wf := &workflow.Workflow{
		Name:   "answer",
		Digest: digest,
		Nodes:  []workflow.Node{{ID: "a", Type: "sealedtest_answer"}},
		Policy: &workflow.Policy{FS: &workflow.FSPolicy{Write: []string{"/srv/answer/*"}}},
	}
	tables, err := manifest.TablesDigest(wf)
	if err != nil {
		panic(err)
	}
	m := &manifest.Manifest{
		Schema: manifest.Schema, Workflow: manifest.Workflow{Name: "answer", Digest: digest},
		KilnVersion: "v9.9.9", GoVersion: goVersion, BuildTags: []string{"kiln_custom", "kiln_control"},
		Families:     []manifest.Family{{ID: "control", Package: "github.com/kilnworks/kiln/capabilities/control", Tag: "kiln_control"}},
		NodeKinds:    []string{"sealedtest_answer"},
		Inputs:       []manifest.Input{{Path: "workflow.toml", Kind: "workflow", SHA256: digest}},
		TablesSHA256: tables,
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
	if code != cli.ExitTampered || out != "" || !strings.Contains(stderr, "embedded manifest describes workflow") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	wf, _, _ = fixture("go1.99")
	if code, _, stderr := run(t, wf, []byte("not a blob")); code != cli.ExitTampered || !strings.Contains(stderr, "malformed") {
		t.Errorf("bad blob: exit %d, %q", code, stderr)
	}
}

// A binary whose tables were changed after sealing (here: the write glob
// of its policy widened in memory, as a patch of its data would) refuses
// every run at start-up, with its own exit code, before any node runs;
// manifest, --version and verify still answer so it can be inspected.
func TestRefusesAlteredTablesAtStartup(t *testing.T) {
	for _, args := range [][]string{nil, {"--quiet"}, {"--mode", "serve"}, {"--resume", "0123456789abcdef01234567", "--state-dir", t.TempDir()}, {"needs"}, {"-h"}} {
		wf, _, blob := fixture("go1.99")
		wf.Policy.FS.Write[0] = "/*"
		code, out, stderr := run(t, wf, blob, args...)
		if code != cli.ExitTampered || out != "" {
			t.Errorf("%q: exit %d (want %d), stdout %q", args, code, cli.ExitTampered, out)
		}
		for _, want := range []string{"answer: this binary was altered after sealing: static tables hash to ", "manifest says tables_sha256", "refusing to start"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%q: stderr %q lacks %q", args, stderr, want)
			}
		}
	}
	wf, raw, blob := fixture("go1.99")
	wf.Nodes[0].Type = "shell_run"
	if code, out, _ := run(t, wf, blob, "manifest"); code != 0 || out != string(raw) {
		t.Errorf("manifest of an altered binary: exit %d, %q", code, out)
	}
	if code, out, _ := run(t, wf, blob, "--version"); code != 0 || !strings.Contains(out, "workflow answer") {
		t.Errorf("--version of an altered binary: exit %d, %q", code, out)
	}
	if code, out, _ := run(t, wf, blob, "verify"); code != cli.ExitFailed || !strings.Contains(out, "FAIL static tables hash to") {
		t.Errorf("verify of an altered binary: exit %d, %q", code, out)
	}
	// The unaltered fixture runs (TestRunsThroughTheCLI), so nothing but
	// the change is refused.
}

// Altered embedded needs or sources refuse the start the same way.
func TestRefusesAlteredNeedsAndSourcesAtStartup(t *testing.T) {
	wf, _, _ := fixture("go1.99")
	wf.Name, wf.Digest = "other", strings.Repeat("e", 64)
	tables, _ := manifest.TablesDigest(wf)
	m := &manifest.Manifest{Schema: manifest.Schema, Workflow: manifest.Workflow{Name: wf.Name, Digest: wf.Digest}, TablesSHA256: tables}
	raw, _ := manifest.Encode(m)
	blob := []byte(manifest.Wrap(raw))
	// No source is registered under this digest.
	if code, _, stderr := run(t, wf, blob); code != cli.ExitTampered || !strings.Contains(stderr, "no embedded source for the workflow with sha256 eeee") {
		t.Errorf("missing source: exit %d, %q", code, stderr)
	}
	sealed.RegisterSource(wf.Digest, []byte("name = \"other\"\n")) // hashes to something else
	if code, _, stderr := run(t, wf, blob); code != cli.ExitTampered || !strings.Contains(stderr, "embedded workflow source hashes to") {
		t.Errorf("changed source: exit %d, %q", code, stderr)
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
