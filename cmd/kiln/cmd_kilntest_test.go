package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// ownFixtures are the fixtures of the engine and the core families (other
// families' fixtures are run by their own tests).
func ownFixtures(t *testing.T) []string {
	t.Helper()
	root := filepath.Join("..", "..", "testdata", "fixtures")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		for _, prefix := range []string{"branch-", "control-", "data-", "engine-", "env-", "fs-", "policy-"} {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				out = append(out, filepath.Join(root, e.Name()))
			}
		}
	}
	if len(out) < 30 {
		t.Fatalf("only %d fixtures found", len(out))
	}
	return out
}

func TestKilnTestRunsFixtures(t *testing.T) {
	dirs := ownFixtures(t)
	r := kiln(t, nil, "", append([]string{"test"}, dirs...)...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != cli.ExitOK || lines[len(lines)-1] != fmt.Sprintf("%d passed, 0 failed", len(dirs)) {
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
