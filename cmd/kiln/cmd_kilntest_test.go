package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen/fixture"
	"github.com/kilnworks/kiln/runtime/cli"
)

// ownFixtures are the fixture folders of the engine and the core families
// (each family's own tests run its folder too; here they go through
// `kiln test`), and how many fixtures they hold.
func ownFixtures(t *testing.T) (folders []string, n int) {
	t.Helper()
	root := filepath.Join("..", "..")
	folders = []string{filepath.Join(root, "runtime", "testdata", "fixtures")}
	for _, family := range []string{"control", "data", "env", "fs"} {
		folders = append(folders, filepath.Join(root, "capabilities", family, "testdata", "fixtures"))
	}
	fixtures, err := fixture.Discover(folders...)
	if err != nil {
		t.Fatal(err)
	}
	return folders, len(fixtures)
}

func TestKilnTestRunsFixtures(t *testing.T) {
	folders, n := ownFixtures(t)
	r := kiln(t, nil, "", append([]string{"test"}, folders...)...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != cli.ExitOK || lines[len(lines)-1] != fmt.Sprintf("%d passed, 0 failed", n) {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "PASS ") {
			t.Fatalf("line %q", l)
		}
	}
}

func TestKilnTestReportsFailures(t *testing.T) {
	root := t.TempDir()
	mk := func(name, expected string) {
		dir := filepath.Join(root, "suite", name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "workflow.toml"), []byte(`
name = "`+name+`"
[[start_nodes]]
name = "main"
source = "manual"
[[nodes]]
id = "say"
type = "template_render"
template = "hi"
`), 0o644)
		os.WriteFile(filepath.Join(dir, "fixture.toml"), []byte("start = \"main\"\n[expected]\n"+expected+"\n"), 0o644)
	}
	mk("good", `status = "completed"`)
	mk("nested/bad", `status = "failed"`)

	// A folder is searched recursively; flags may follow the paths.
	r := kiln(t, nil, "", "test", filepath.Join(root, "suite"))
	want := "PASS good\nFAIL nested/bad: status completed, want failed\n1 passed, 1 failed\n"
	if r.code != cli.ExitTestFail || r.stdout != want {
		t.Fatalf("exit %d\n%s\nwant\n%s", r.code, r.stdout, want)
	}

	r = kiln(t, nil, "", "test", filepath.Join(root, "suite"), "--json")
	var rep struct {
		Passed, Failed int
		Fixtures       []struct {
			Name     string   `json:"name"`
			Pass     bool     `json:"pass"`
			Failures []string `json:"failures"`
			Status   string   `json:"status"`
			Path     []string `json:"path"`
		} `json:"fixtures"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != cli.ExitTestFail {
		t.Fatalf("json: %d %v\n%s", r.code, err, r.stdout)
	}
	if rep.Passed != 1 || rep.Failed != 1 || len(rep.Fixtures) != 2 || rep.Fixtures[1].Pass ||
		rep.Fixtures[1].Status != "completed" || len(rep.Fixtures[1].Failures) != 1 || rep.Fixtures[0].Path[0] != "say" {
		t.Fatalf("report %s", r.stdout)
	}

	// A single fixture directory is named by its base name.
	r = kiln(t, nil, "", "test", filepath.Join(root, "suite", "good"))
	if r.code != cli.ExitOK || r.stdout != "PASS good\n1 passed, 0 failed\n" {
		t.Fatalf("single: %d %q", r.code, r.stdout)
	}

	for _, args := range [][]string{{"test"}, {"test", filepath.Join(root, "nothing-here")}, {"test", "--nope", root}} {
		if r := kiln(t, nil, "", args...); r.code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, r.code, cli.ExitUsage, r.stderr)
		}
	}
}
