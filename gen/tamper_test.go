package gen_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/cli"
)

// TestTamperedBinaryRefusesToStart builds a real sealed binary whose
// policy allows writes under DIR/allowed only, then patches its data the
// way an attacker with write access to the file would: the policy glob in
// the static tables (same length, DIR/widened), or the path of the
// filesystem need. The patched binary must refuse to start with
// cli.ExitTampered and write nothing; the unpatched one runs and keeps to
// its policy.
func TestTamperedBinaryRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a sealed binary")
	}
	dir := t.TempDir()
	allowed, widened := filepath.Join(dir, "allowed"), filepath.Join(dir, "widened") // same length
	for _, d := range []string{allowed, widened} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	glob := allowed + "/**"
	source := []byte(`name = "tamper"

[[start_nodes]]
name = "main"
source = "manual"
entry_node = "save"

[[nodes]]
id = "save"
type = "write_file"
path_from = "trigger.output_path"
content_from = "trigger.text"

[[nodes]]
id = "done"
type = "terminate"

[[edges]]
from = "save"
to = "done"

[policy.fs]
write = ["` + glob + `"]
`)
	src := filepath.Join(dir, "src", "workflow.toml")
	writeFile(t, src, source)
	res, err := gen.Build(context.Background(), gen.BuildOptions{
		Workflow:   src,
		Output:     filepath.Join(dir, "bin", "tamper"),
		KilnSource: repoRoot(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	original := mustRead(t, res.Binary)

	// run runs bin asking it to write into target and returns its exit
	// code and output.
	run := func(t *testing.T, bin, target string) (int, string) {
		t.Helper()
		input := filepath.Join(t.TempDir(), "input.json")
		writeFile(t, input, []byte(`{"output_path":"`+filepath.Join(target, "out.txt")+`","text":"written"}`))
		out, err := exec.Command(bin, "--input", input, "--quiet").CombinedOutput()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return ee.ExitCode(), string(out)
		case err != nil:
			t.Fatal(err)
		}
		return 0, string(out)
	}
	// patched writes a copy of the binary with each of the byte ranges
	// found by at replaced by the same number of bytes of repl.
	patched := func(t *testing.T, at func(t *testing.T, bin []byte) []int, old, repl string) string {
		t.Helper()
		data := bytes.Clone(original)
		for _, i := range at(t, data) {
			if !bytes.Equal(data[i:i+len(old)], []byte(old)) {
				t.Fatalf("offset %d does not hold %q", i, old)
			}
			copy(data[i:], repl)
		}
		bin := filepath.Join(t.TempDir(), "tamper")
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		return bin
	}
	// outsideSource finds every occurrence of s in bin except those inside
	// the embedded workflow source (which the binary never parses; a patch
	// there is what `BIN verify` reports).
	outsideSource := func(s string) func(t *testing.T, bin []byte) []int {
		return func(t *testing.T, bin []byte) []int {
			t.Helper()
			start := bytes.Index(bin, source)
			if start < 0 {
				t.Fatal("the workflow source is not embedded in the binary")
			}
			var at []int
			for off := 0; ; {
				i := bytes.Index(bin[off:], []byte(s))
				if i < 0 {
					break
				}
				i += off
				if i < start || i >= start+len(source) {
					at = append(at, i)
				}
				off = i + 1
			}
			if len(at) != 1 {
				t.Fatalf("%q occurs %d times outside the embedded source, want exactly once", s, len(at))
			}
			return at
		}
	}
	empty := func(t *testing.T, d string) {
		t.Helper()
		if entries, err := os.ReadDir(d); err != nil || len(entries) != 0 {
			t.Errorf("%s: %v entries (%v), want none", d, len(entries), err)
		}
	}

	t.Run("unpatched", func(t *testing.T) {
		if code, out := run(t, res.Binary, allowed); code != cli.ExitOK {
			t.Fatalf("writing under %s: exit %d\n%s", allowed, code, out)
		}
		if data, err := os.ReadFile(filepath.Join(allowed, "out.txt")); err != nil || string(data) != "written" {
			t.Fatalf("out.txt = %q, %v", data, err)
		}
		os.Remove(filepath.Join(allowed, "out.txt"))
		// The policy forbids the other directory.
		if code, out := run(t, res.Binary, widened); code != cli.ExitFailed {
			t.Fatalf("writing under %s: exit %d, want %d\n%s", widened, code, cli.ExitFailed, out)
		}
		empty(t, widened)
	})

	cases := []struct {
		name, old, repl, want string
	}{
		{"policy glob in the tables", glob, widened + "/**", "static tables hash to "},
		{"filesystem need", `"path":"` + allowed + `"`, `"path":"` + widened + `"`, "embedded effective needs hash to "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bin := patched(t, outsideSource(tc.old), tc.old, tc.repl)
			code, out := run(t, bin, widened)
			if code != cli.ExitTampered {
				t.Errorf("patched binary: exit %d, want %d (ExitTampered)\n%s", code, cli.ExitTampered, out)
			}
			for _, want := range []string{"tamper: this binary was altered after sealing: ", tc.want, "refusing to start"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if _, err := os.Stat(filepath.Join(widened, "out.txt")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the patched binary wrote %s (%v)", filepath.Join(widened, "out.txt"), err)
			}
			empty(t, widened)
			empty(t, allowed)
			// It can still be inspected: its own verify names the change.
			vout, err := exec.Command(bin, "verify").CombinedOutput()
			if err == nil || !strings.Contains(string(vout), "FAIL "+tc.want) {
				t.Errorf("verify of the patched binary: %v\n%s", err, vout)
			}
		})
	}
}
