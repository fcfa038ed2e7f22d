package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

// TestBuildRefusesBlockedNeeds: a needs catalog asking a mandatory path and
// host the workflow's [policy] does not allow gives a binary that could
// never start, so kiln build refuses (exit 5) naming each need and why,
// and writes nothing. --allow-blocked builds it, and that binary indeed
// refuses to start (exit 6).
func TestBuildRefusesBlockedNeeds(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	wf := writeWorkflow(t, dir, `
name = "blocked"
[[nodes]]
id = "save"
type = "write_file"
path_from = "trigger.path"
content_from = "trigger.text"
[policy.fs]
write = ["`+out+`/**"]
`)
	catalog := writeFile(t, dir, "needs.toml", `
[[agent_needs]]
class_name = "workflow:blocked"
[agent_needs.needs]
filesystem = { allow = [{ path = "/etc/blocked-test", mode = "rw" }] }
network = { allow = ["evil.example.net"] }
`)
	bin := filepath.Join(t.TempDir(), "blocked")
	code, stdout, stderr := runInProcess("build", wf, "-o", bin, "--needs", catalog)
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d\nstdout %q\nstderr %q", code, cli.ExitFailed, stdout, stderr)
	}
	for _, want := range []string{"filesystem:/etc/blocked-test:rw", "policy.fs.write", "network:evil.example.net", "policy.http.urls", "--allow-blocked"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not name %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(bin); err == nil {
		t.Error("a refused build wrote a binary")
	}
	if testing.Short() {
		return
	}
	code, _, stderr = runInProcess("build", wf, "-o", bin, "--needs", catalog, "--allow-blocked")
	if code != cli.ExitOK {
		t.Fatalf("--allow-blocked: exit %d\n%s", code, stderr)
	}
	input := writeFile(t, dir, "in.json", `{"path":"`+out+`/a","text":"x"}`)
	cmd := exec.Command(bin, "--input", input)
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != cli.ExitBlocked {
		t.Errorf("the --allow-blocked binary: %v, want exit %d", err, cli.ExitBlocked)
	}
}
