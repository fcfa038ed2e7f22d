package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/cli"
	"github.com/kilnworks/kiln/runtime/testtool"
)

func runKilnGraph(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"graph"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGraphFormats(t *testing.T) {
	wf := filepath.Join(testtool.RepoRoot(t), "examples", "fanout", "workflow.toml")

	code, out, errs := runKilnGraph(t, wf)
	if code != cli.ExitOK || !strings.HasPrefix(out, `%% workflow "fanout" (kiln graph)`+"\nflowchart TD\n") {
		t.Fatalf("default mermaid: exit %d, stderr %s\n%s", code, errs, out)
	}
	if !strings.Contains(out, `subgraph c1["score-item (score-item.toml)"]`) {
		t.Errorf("mermaid lacks the mapped child:\n%s", out)
	}
	code, out1, _ := runKilnGraph(t, "--depth", "1", wf)
	if code != cli.ExitOK || strings.Contains(out1, "subgraph") || !strings.Contains(out1, "each item score-item.toml") {
		t.Errorf("--depth 1 drew the child or lost its name (exit %d):\n%s", code, out1)
	}

	dir := t.TempDir()
	dotFile := filepath.Join(dir, "g.dot")
	if code, _, errs := runKilnGraph(t, wf, "--format", "dot", "-o", dotFile); code != cli.ExitOK {
		t.Fatalf("dot: exit %d: %s", code, errs)
	}
	dotSrc, err := os.ReadFile(dotFile)
	if err != nil || !bytes.HasPrefix(dotSrc, []byte(`digraph "fanout" {`)) {
		t.Fatalf("dot file: %v\n%s", err, dotSrc)
	}
	svgFile := filepath.Join(dir, "g.svg")
	if code, _, errs := runKilnGraph(t, "--format=svg", "-o", svgFile, wf); code != cli.ExitOK {
		t.Fatalf("svg: exit %d: %s", code, errs)
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	nodes := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" && strings.HasPrefix(a.Value, "node ") {
					nodes++
				}
			}
		}
	}
	if nodes != 6 {
		t.Errorf("svg has %d node groups, want 6 (4 nodes and the child's 2)", nodes)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("-o left %d files in the directory, want 2 (no temporary files)", len(entries))
	}

	dot := testtool.Command(t, "dot")
	cmd := exec.Command(dot, "-Tsvg", dotFile)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("dot -Tsvg: %v %s", err, stderr.String())
	}
}

func TestGraphErrors(t *testing.T) {
	root := testtool.RepoRoot(t)
	wf := filepath.Join(root, "examples", "hello", "workflow.toml")
	invalid := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(invalid, []byte("name = \"bad\"\n[[nodes]]\nid = \"a\"\ntype = \"no_such_kind\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--format", "png", wf}, cli.ExitUsage, "--format must be mermaid, dot or svg"},
		{[]string{"--depth", "-1", wf}, cli.ExitUsage, "--depth must be at least 0"},
		{[]string{}, cli.ExitUsage, "exactly one WORKFLOW.toml"},
		{[]string{wf, wf}, cli.ExitUsage, "exactly one WORKFLOW.toml"},
		{[]string{filepath.Join(root, "no-such.toml")}, cli.ExitUsage, "no-such.toml"},
		{[]string{invalid}, cli.ExitFailed, `"ok":false`},
		{[]string{"-o", filepath.Join(t.TempDir(), "missing-dir", "g.mmd"), wf}, cli.ExitUsage, "-o "},
	} {
		code, _, errs := runKilnGraph(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("kiln graph %q: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, errs, c.msg)
		}
	}
}
