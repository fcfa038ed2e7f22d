package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestSignWhatGoBuildBuilt: kiln gen, then a plain go build -trimpath,
// gives a binary without sidecars. kiln sign writes its manifest, SBOM
// (every module of its build info, with sums) and provenance from what it
// embeds and links, then signs all four; kiln inspect, kiln verify and
// cosign verify-blob accept the result, and a tampered sidecar is refused.
func TestSignWhatGoBuildBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a generated program")
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if code, _, errOut := supplyRun(t, "gen", copySupplyWorkflow(t), "-o", prog, "--module", "example.com/signed", "--kiln-source", kilnRoot(t)); code != cli.ExitOK {
		t.Fatalf("kiln gen: exit %d\n%s", code, errOut)
	}
	bin := filepath.Join(dir, "signed")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Dir = prog
	build.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, s := range supply.Sidecars(bin) {
		if _, err := os.Stat(s); err == nil {
			t.Fatalf("go build wrote %s?", s)
		}
	}

	t.Setenv("COSIGN_PASSWORD", "sign-what-you-built")
	key := filepath.Join(dir, "cosign")
	if code, _, errOut := supplyRun(t, "keygen", "--output-key-prefix", key); code != cli.ExitOK {
		t.Fatalf("keygen: %s", errOut)
	}
	code, out, errOut := supplyRun(t, "sign", bin, "--key", key+".key")
	if code != cli.ExitOK || strings.Count(out, "wrote ") != 3+8 {
		t.Fatalf("kiln sign: exit %d\n%s%s", code, out, errOut)
	}
	for _, s := range supply.Sidecars(bin) {
		if !strings.Contains(out, "wrote "+s+"\n") {
			t.Errorf("kiln sign did not write %s:\n%s", s, out)
		}
	}
	if code, out, errOut := supplyRun(t, "inspect", bin); code != cli.ExitOK {
		t.Errorf("kiln inspect: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := supplyRun(t, "verify", bin, "--key", key+".pub"); code != cli.ExitOK {
		t.Errorf("kiln verify: exit %d\n%s%s", code, out, errOut)
	}

	// The SBOM lists the build info's modules with their sums, and names
	// the generating kiln with its h1: hash.
	facts, err := supply.ReadBuildFacts(bin)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		Metadata struct {
			Tools struct {
				Components []struct {
					Name   string                     `json:"name"`
					Hashes []struct{ Content string } `json:"hashes"`
				} `json:"components"`
			} `json:"tools"`
		} `json:"metadata"`
		Components []struct {
			Name    string                     `json:"name"`
			Version string                     `json:"version"`
			Hashes  []struct{ Content string } `json:"hashes"`
		} `json:"components"`
	}
	data, err := os.ReadFile(bin + supply.SBOMSuffix)
	if err != nil || json.Unmarshal(data, &bom) != nil {
		t.Fatalf("SBOM: %v\n%s", err, data)
	}
	if len(bom.Components) != len(facts.Modules) || len(facts.Modules) == 0 {
		t.Fatalf("SBOM lists %d components, the build info %d modules", len(bom.Components), len(facts.Modules))
	}
	for i, m := range facts.Modules {
		c := bom.Components[i]
		if c.Name != m.Path || c.Version != m.Version || len(c.Hashes) != 1 || c.Hashes[0].Content == "" {
			t.Errorf("component %d = %+v, module %+v: want its path, version and sum", i, c, m)
		}
	}
	if tools := bom.Metadata.Tools.Components; len(tools) != 1 || tools[0].Name != "kiln" || len(tools[0].Hashes) != 1 {
		t.Errorf("SBOM tool: %+v, want kiln with its hash", tools)
	}

	t.Run("cosign verify-blob", func(t *testing.T) {
		cosign := testtool.CacheBin(t, "cosign")
		for _, f := range append([]string{bin}, supply.Sidecars(bin)...) {
			code, out := exe(t, []string{"HOME=" + t.TempDir()}, cosign, "verify-blob", "--key", key+".pub",
				"--signature", f+supply.SigSuffix, "--insecure-ignore-tlog=true", f)
			if code != 0 {
				t.Errorf("cosign verify-blob %s: exit %d\n%s", filepath.Base(f), code, out)
			}
		}
	})

	// kiln sign leaves existing sidecars alone: a tampered one is signed
	// as it is, and verification still refuses it.
	mpath := bin + supply.ManifestSuffix
	m, _ := os.ReadFile(mpath)
	if err := os.WriteFile(mpath, []byte(strings.Replace(string(m), `"name": "supply"`, `"name": "other"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := supplyRun(t, "sign", bin, "--key", key+".key"); code != cli.ExitOK || strings.Contains(out, "wrote "+mpath+"\n") {
		t.Fatalf("re-sign: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := supplyRun(t, "verify", bin, "--key", key+".pub"); code != cli.ExitFailed || !strings.Contains(errOut, "REFUSED") {
		t.Errorf("tampered manifest: exit %d\n%s", code, errOut)
	}
}
