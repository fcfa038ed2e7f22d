package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
)

func runKiln(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckExamples: every example workflow passes `kiln check`.
func TestCheckExamples(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*/workflow.toml")
	if len(files) < 8 {
		t.Fatalf("want at least 8 examples, found %d", len(files))
	}
	for _, f := range files {
		code, stdout, stderr := runKiln(t, "check", f)
		name := filepath.Base(filepath.Dir(f))
		// Lint warnings may follow ok (webhook's switch on trigger.action).
		if code != cli.ExitOK || !strings.HasPrefix(stdout, `{"workflow":"`+name+`","ok":true`) || strings.Contains(stdout, `"issues"`) || stderr != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q", f, code, stdout, stderr)
		}
	}
}

func TestCheckReports(t *testing.T) {
	dir := t.TempDir()
	valid := writeFile(t, dir, "valid.toml", "name = \"ok-wf\"\n[[nodes]]\nid = \"done\"\ntype = \"terminate\"\n")
	invalid := writeFile(t, dir, "invalid.toml", `name = "bad-wf"
[[nodes]]
id = "reply"
type = "respond"
content_type = "text<xml"
body_template = "<x/>"
[[edges]]
from = "reply"
to = "ghost"
`)
	unparsable := writeFile(t, dir, "unparsable.toml", "name = \"x\"\n\n[[nodes]]\nid = \"a\"\ntype = \"merge\"\nshape = \"round\"\n")

	t.Run("valid", func(t *testing.T) {
		code, stdout, _ := runKiln(t, "check", valid)
		if code != cli.ExitOK || stdout != "{\"workflow\":\"ok-wf\",\"ok\":true}\n" {
			t.Fatalf("exit %d stdout %q", code, stdout)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		code, stdout, stderr := runKiln(t, "check", invalid)
		if code != cli.ExitFailed || stderr != "" {
			t.Fatalf("exit %d stderr %q", code, stderr)
		}
		var rep struct {
			Workflow string `json:"workflow"`
			OK       *bool  `json:"ok"`
			Issues   []struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatalf("report is not JSON: %v: %q", err, stdout)
		}
		if rep.Workflow != "bad-wf" || rep.OK == nil || *rep.OK || len(rep.Issues) != 2 ||
			rep.Issues[0].Code != "respond_content_type" || rep.Issues[1].Code != "dangling_edge" {
			t.Fatalf("report = %+v", rep)
		}
		// Output JSON is not HTML-escaped.
		if !strings.Contains(stdout, `text<xml`) || strings.Contains(stdout, `\u003c`) {
			t.Errorf("message was HTML-escaped: %s", stdout)
		}
	})
	t.Run("unparsable", func(t *testing.T) {
		code, stdout, stderr := runKiln(t, "check", unparsable)
		want := unparsable + ":6: nodes[0].shape: unknown key \"shape\"\n"
		if code != cli.ExitUsage || stdout != "" || stderr != want {
			t.Fatalf("exit %d stdout %q stderr %q, want stderr %q", code, stdout, stderr, want)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		code, _, stderr := runKiln(t, "check", filepath.Join(dir, "nope.toml"))
		if code != cli.ExitUsage || !strings.Contains(stderr, "nope.toml: cannot read: no such file or directory") {
			t.Fatalf("exit %d stderr %q", code, stderr)
		}
	})
	t.Run("worst code wins", func(t *testing.T) {
		code, stdout, _ := runKiln(t, "check", valid, invalid)
		if code != cli.ExitFailed || strings.Count(stdout, "\n") != 2 {
			t.Fatalf("exit %d stdout %q", code, stdout)
		}
		if code, _, _ := runKiln(t, "check", invalid, unparsable, valid); code != cli.ExitUsage {
			t.Fatalf("an unparsable file must outrank an invalid one, exit %d", code)
		}
	})
	t.Run("text", func(t *testing.T) {
		code, stdout, _ := runKiln(t, "check", "--format", "text", valid, invalid)
		want := valid + ": ok (workflow \"ok-wf\")\n" + invalid + ": 2 issues (workflow \"bad-wf\")\n"
		if code != cli.ExitFailed || !strings.HasPrefix(stdout, want) ||
			!strings.Contains(stdout, "  dangling_edge                edge 0 (reply -> ghost): to \"ghost\" is not a declared node\n") {
			t.Fatalf("exit %d stdout:\n%s", code, stdout)
		}
	})
	t.Run("usage", func(t *testing.T) {
		if code, _, _ := runKiln(t, "check"); code != cli.ExitUsage {
			t.Errorf("no files: exit %d", code)
		}
		if code, _, stderr := runKiln(t, "check", "--format", "yaml", valid); code != cli.ExitUsage || !strings.Contains(stderr, "--format") {
			t.Errorf("bad format: exit %d %q", code, stderr)
		}
	})
}
