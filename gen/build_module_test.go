package gen_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// TestCachedKilnSource: a released kiln is used from the module cache,
// with no replace line, and its go.sum lines come from the cache's own
// hash files. The go.mod hash is checked against a known answer: the
// go.sum line of golang.org/x/mod v0.42.0, whose .mod file the test
// borrows from the real module cache.
func TestCachedKilnSource(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	realMod := filepath.Join(strings.TrimSpace(string(out)), "cache", "download", "golang.org", "x", "mod", "@v", "v0.42.0.mod")
	modText, err := os.ReadFile(realMod)
	if err != nil {
		testtool.Missing(t, "golang.org/x/mod v0.42.0 is not in the module cache: %v", err)
	}
	const wantModSum = "h1:u5fzIrRInkL8MaO1cbRkUHT64v303YIT5KEqpNr7jRs=" // from kiln's go.sum

	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	if _, err := gen.CachedKilnSource("v1.2.3"); err == nil || !strings.Contains(err.Error(), "not in the module cache") {
		t.Fatalf("empty cache: %v", err)
	}
	dir := filepath.Join(cache, "github.com", "kilnworks", "kiln@v1.2.3")
	writeFile(t, filepath.Join(dir, "go.mod"), []byte("module github.com/kilnworks/kiln\n\ngo 1.26.0\n\nrequire github.com/robfig/cron/v3 v3.0.1\n"))
	writeFile(t, filepath.Join(dir, "go.sum"), []byte("github.com/robfig/cron/v3 v3.0.1 h1:x=\n"))
	dl := filepath.Join(cache, "cache", "download", "github.com", "kilnworks", "kiln", "@v")
	writeFile(t, filepath.Join(dl, "v1.2.3.ziphash"), []byte("h1:zip=\n"))
	writeFile(t, filepath.Join(dl, "v1.2.3.mod"), modText)

	src, err := gen.CachedKilnSource("v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if src.Replace || src.Version != "v1.2.3" || src.GoVersion != "1.26.0" || len(src.Requires) != 1 {
		t.Errorf("source %+v", src)
	}
	sum := string(src.GoSum)
	for _, want := range []string{
		"github.com/robfig/cron/v3 v3.0.1 h1:x=\n",
		"github.com/kilnworks/kiln v1.2.3 h1:zip=\n",
		"github.com/kilnworks/kiln v1.2.3/go.mod " + wantModSum + "\n",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("go.sum lacks %q:\n%s", want, sum)
		}
	}
	plan := load(t, helloWorkflow(t), false)
	gomod, _, err := gen.ModuleFiles(plan, "example.com/x", src, "../ignored")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "require github.com/kilnworks/kiln v1.2.3") || strings.Contains(string(gomod), "replace") {
		t.Errorf("go.mod for a released kiln:\n%s", gomod)
	}
}
