package gen_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// offline is the environment of docs/pipelines.md's offline CI: the go
// command adds go.sum lines from the warm module cache, downloads nothing.
var offline = []string{"GOFLAGS=-mod=mod", "GOPROXY=off"}

// step runs one command of the recipe in dir and returns its output.
func step(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOWORK=off", "CGO_ENABLED=0"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// exampleModule returns go.mod with kiln's replace pointing at replace.
func exampleModule(t *testing.T, gomod []byte, replace string) []byte {
	t.Helper()
	f, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.DropReplace(gen.KilnModule, ""); err != nil {
		t.Fatal(err)
	}
	if err := f.AddReplace(gen.KilnModule, "", replace, ""); err != nil {
		t.Fatal(err)
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPipelineRecipe runs docs/pipelines.md in a new user module, offline
// on a warm module cache: pin kiln (replace + require + tool directive,
// kiln's go.sum, go mod tidy), go generate, check the generated code is current with git
// diff, go build -trimpath, kiln inspect, kiln check --strict, kiln sign,
// kiln verify, and cosign verify-blob of every signed file. The module it
// ends with is examples/gogenerate's (with the replace at ../..), so the
// example follows the recipe exactly (-update rewrites it).
func TestPipelineRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles kiln through go tool")
	}
	git := testtool.Command(t, "git")
	cosign := testtool.CacheBin(t, "cosign")
	// The user module sits at one fixed path (removed after the test), so
	// Go's build cache keeps its vendored packages (step 4) from one run to
	// the next: only a machine's first run compiles them all (minutes).
	user := filepath.Join(repoRoot(t), ".cache", "pipeline-recipe", "user")
	if err := os.RemoveAll(filepath.Dir(user)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(user)) })
	for _, f := range []string{"workflow.toml", "generate.go"} {
		writeFile(t, filepath.Join(user, f), mustRead(t, filepath.Join(gogenerateDir(t), f)))
	}
	home := t.TempDir()
	gitEnv := []string{"HOME=" + home, "GIT_AUTHOR_NAME=ci", "GIT_AUTHOR_EMAIL=ci@example.com", "GIT_COMMITTER_NAME=ci", "GIT_COMMITTER_EMAIL=ci@example.com"}

	// 1. Pin kiln from a checkout: a snapshot of this tree, which other
	// work may be editing while the test runs.
	checkout := filepath.Join(t.TempDir(), "kiln")
	copySource(t, repoRoot(t), checkout)
	step(t, user, offline, "go", "mod", "init", exampleModulePath)
	step(t, user, offline, "go", "mod", "edit", "-go="+kilnSource(t).GoVersion,
		"-require="+gen.KilnModule+"@v0.0.0-00010101000000-000000000000",
		"-replace="+gen.KilnModule+"="+checkout,
		"-tool="+gen.KilnModule+"/cmd/kiln")
	// Offline, go mod tidy cannot ask the checksum database: kiln's go.sum
	// (part of the reviewed copy) vouches for its dependencies.
	writeFile(t, filepath.Join(user, "go.sum"), mustRead(t, filepath.Join(checkout, "go.sum")))
	// -e: tidy also looks for the test dependencies of kiln's dependencies,
	// which a module cache filled by building kiln does not hold.
	step(t, user, offline, "go", "mod", "tidy", "-e")

	// 2.-3. The CI recipe, timed on the warm cache after kiln is compiled.
	step(t, user, offline, "go", "build", "-o", os.DevNull, gen.KilnModule+"/cmd/kiln") // warm: compile the tool once
	start := time.Now()
	step(t, user, offline, "go", "generate", "./...")
	step(t, user, gitEnv, git, "init", "-q")
	step(t, user, gitEnv, git, "add", "-A")
	step(t, user, gitEnv, git, "commit", "-q", "-m", "generated")
	step(t, user, offline, "go", "generate", "./...")
	step(t, user, gitEnv, git, "diff", "--exit-code", "--", "agent")
	bin := filepath.Join(user, "bin", "agent")
	step(t, user, offline, "go", "build", "-trimpath", "-o", bin, "./agent")
	step(t, user, offline, "go", "tool", "kiln", "inspect", bin)
	step(t, user, offline, "go", "tool", "kiln", "check", "--strict", "workflow.toml")
	keyEnv := append([]string{"COSIGN_PASSWORD=pipeline"}, offline...)
	key := filepath.Join(t.TempDir(), "cosign")
	step(t, user, keyEnv, "go", "tool", "kiln", "keygen", "--output-key-prefix", key)
	step(t, user, keyEnv, "go", "tool", "kiln", "sign", bin, "--key", key+".key")
	step(t, user, offline, "go", "tool", "kiln", "verify", bin, "--key", key+".pub")
	for _, f := range append([]string{bin}, supply.Sidecars(bin)...) {
		step(t, user, []string{"HOME=" + home}, cosign, "verify-blob", "--key", key+".pub", "--signature", f+supply.SigSuffix, "--insecure-ignore-tlog=true", f)
	}
	t.Logf("pipeline recipe (generate twice, git diff, build, inspect, check, keygen, sign, verify, 4x cosign) on a warm cache: %s", time.Since(start).Round(time.Millisecond))

	// The example module is this recipe's result.
	want := map[string][]byte{
		"go.mod": exampleModule(t, mustRead(t, filepath.Join(user, "go.mod")), "../.."),
		"go.sum": mustRead(t, filepath.Join(user, "go.sum")),
	}
	for name, data := range want {
		path := filepath.Join(gogenerateDir(t), name)
		if *update {
			writeFile(t, path, data)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
			t.Errorf("examples/gogenerate/%s is not what the recipe gives (go test ./gen -run PipelineRecipe -update): %v", name, err)
		}
	}

	// 4. Offline CI with no module cache: go mod vendor once (offline, from
	// the warm cache), then the recipe again with -mod=vendor and an empty
	// module cache. kiln's source tree stays where the replace points (the
	// reviewed copy is part of the repository), so kiln names itself the
	// same: the committed program is still current, and the vendored
	// build links exactly what the module-cache build links.
	vendorStart := time.Now()
	step(t, user, []string{"GOPROXY=off"}, "go", "mod", "vendor")
	if _, err := os.Stat(filepath.Join(user, "vendor", filepath.FromSlash(gen.KilnModule), "cmd", "kiln")); err != nil {
		t.Fatalf("go mod vendor did not vendor the kiln tool: %v", err)
	}
	// go tool kiln compiles kiln and its dependencies from vendor/: from
	// Go's build cache after a machine's first run (the folder is fixed).
	vendored := []string{"GOFLAGS=-mod=vendor", "GOPROXY=off", "GOMODCACHE=" + t.TempDir()}
	step(t, user, vendored, "go", "generate", "./...")
	step(t, user, gitEnv, git, "diff", "--exit-code", "--", "agent")
	vbin := filepath.Join(user, "bin", "agent-vendored")
	step(t, user, vendored, "go", "build", "-trimpath", "-o", vbin, "./agent")
	step(t, user, vendored, "go", "tool", "kiln", "inspect", vbin)
	fromCache, err := gen.Inspect(bin)
	if err != nil {
		t.Fatal(err)
	}
	fromVendor, err := gen.Inspect(vbin)
	if err != nil {
		t.Fatal(err)
	}
	if !fromVendor.OK() || !slices.Equal(fromVendor.Packages, fromCache.Packages) {
		t.Errorf("vendored build: problems %v; links %v, the module-cache build %v", fromVendor.Problems, fromVendor.Packages, fromCache.Packages)
	}
	t.Logf("vendored (go mod vendor, generate, git diff, build, inspect): %s", time.Since(vendorStart).Round(time.Millisecond))
}

// TestMissingKilnNamesTheRecipe: when kiln's module is not in the module
// cache, the error points at the replace recipe, not at a download that
// cannot work for an unpublished module.
func TestMissingKilnNamesTheRecipe(t *testing.T) {
	t.Setenv("GOMODCACHE", t.TempDir())
	_, err := gen.CachedKilnSource("v9.9.9")
	if err == nil || !strings.Contains(err.Error(), "docs/pipelines.md") || strings.Contains(err.Error(), "go mod download") {
		t.Errorf("CachedKilnSource: %v", err)
	}
	be := &gen.BuildError{Missing: gen.KilnModule + "@v9.9.9", Output: "go: github.com/kilnworks/kiln@v9.9.9: module lookup disabled by GOPROXY=off"}
	if msg := be.Error(); !strings.Contains(msg, "docs/pipelines.md") || strings.Contains(msg, "go mod download") {
		t.Errorf("BuildError: %s", msg)
	}
}
