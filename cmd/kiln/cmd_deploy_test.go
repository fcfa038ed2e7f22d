package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestPackageAndDeployCLI drives kiln package, deploy k8s/systemd and
// deploy check on a sealed hello and webhook.
func TestPackageAndDeployCLI(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, ex := range []string{"hello", "webhook"} {
		bins[ex] = filepath.Join(dir, ex)
		wf := filepath.Join(kilnRoot(t), "examples", ex, "workflow.toml")
		if code, out, errOut := supplyRun(t, "build", wf, "-o", bins[ex], "--kiln-source", kilnRoot(t)); code != cli.ExitOK {
			t.Fatalf("build %s: exit %d\n%s%s", ex, code, out, errOut)
		}
	}
	hello, webhook := bins["hello"], bins["webhook"]

	// Two runs of kiln package print (and write) the same digest.
	imageLine := regexp.MustCompile(`^image hello:latest (sha256:[0-9a-f]{64}) \(manifest (sha256:[0-9a-f]{64})\)\n$`)
	var digests []string
	for i := range 2 {
		out := filepath.Join(dir, "img", string(rune('a'+i)))
		code, stdout, stderr := supplyRun(t, "package", hello, "-o", out)
		m := imageLine.FindStringSubmatch(stdout)
		if code != cli.ExitOK || m == nil {
			t.Fatalf("package: exit %d\n%s%s", code, stdout, stderr)
		}
		digests = append(digests, m[1])
	}
	if digests[0] != digests[1] {
		t.Fatalf("two kiln package runs: %s and %s", digests[0], digests[1])
	}
	// --push uploads the same image to a registry (in-process, loopback).
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	ref := strings.TrimPrefix(reg.URL, "http://") + "/kiln/hello:v1"
	code, stdout, stderr := supplyRun(t, "package", hello, "-o", filepath.Join(dir, "img", "pushed"), "--push", ref)
	if code != cli.ExitOK || !strings.Contains(stdout, "pushed "+strings.TrimSuffix(ref, ":v1")+"@"+digests[0]+"\n") {
		t.Fatalf("package --push: exit %d\n%s%s", code, stdout, stderr)
	}
	// A non-empty output directory is refused, not overwritten.
	if code, _, stderr := supplyRun(t, "package", hello, "-o", filepath.Join(dir, "img", "a")); code == cli.ExitOK || !strings.Contains(stderr, "not empty") {
		t.Fatalf("package into a used directory: exit %d: %s", code, stderr)
	}

	out := filepath.Join(dir, "deploy")
	for _, args := range [][]string{
		{"deploy", "k8s", hello, "-o", out},
		{"deploy", "systemd", hello, "-o", out},
	} {
		if code, stdout, stderr := supplyRun(t, args...); code != cli.ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
	// The manifests pin the image kiln package builds.
	k8s, err := os.ReadFile(filepath.Join(out, "hello.k8s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(k8s), `image: "hello@`+digests[0]+`"`) {
		t.Errorf("hello.k8s.yaml does not pin image hello@%s", digests[0])
	}

	// deploy check ties the files and the image to the binary.
	for _, p := range []string{out, filepath.Join(dir, "img", "a"), filepath.Join(out, "hello.service")} {
		if code, stdout, stderr := supplyRun(t, "deploy", "check", p, hello); code != cli.ExitOK || !strings.Contains(stdout, "generated from manifest sha256:") {
			t.Errorf("deploy check %s hello: exit %d\n%s%s", p, code, stdout, stderr)
		}
		if code, stdout, stderr := supplyRun(t, "inspect", p); code != cli.ExitOK || !strings.Contains(stdout, "generated from manifest sha256:") {
			t.Errorf("inspect %s: exit %d\n%s%s", p, code, stdout, stderr)
		}
		code, stdout, _ := supplyRun(t, "deploy", "check", p, webhook)
		if code != cli.ExitFailed || !strings.Contains(stdout, "MISMATCH") {
			t.Errorf("deploy check %s against another binary: exit %d, want %d\n%s", p, code, cli.ExitFailed, stdout)
		}
	}
	if code, _, stderr := supplyRun(t, "deploy", "nomad", hello, "-o", out); code != cli.ExitUsage || !strings.Contains(stderr, "unknown target") {
		t.Errorf("deploy nomad: exit %d: %s", code, stderr)
	}
	if code, _, _ := supplyRun(t, "deploy", "k8s", hello); code != cli.ExitUsage {
		t.Errorf("deploy k8s without -o: exit %d", code)
	}
}

// k8s.io/api and the YAML decoder are test-only: neither the kiln CLI nor
// the deploy package links them.
func TestKubernetesAPIStaysTestOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../../gen/deploy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") {
			t.Errorf("cmd/kiln links %s", p)
		}
	}
}
