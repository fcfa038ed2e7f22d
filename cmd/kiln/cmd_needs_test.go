package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateNeedsGolden = flag.Bool("update-needs", false, "rewrite testdata/needs/*.golden.json")

func runInProcess(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestNeedsGolden(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := filepath.Join(root, "examples", "classifier", "workflow.toml")
	code, out, errOut := runInProcess("needs", wf, "--needs", filepath.Join(root, "testdata", "needs", "extra.toml"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden := filepath.Join(root, "testdata", "needs", "classifier.golden.json")
	if *updateNeedsGolden {
		os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("kiln needs output differs from %s:\n%s", golden, out)
	}
	for _, s := range []string{`"secret:SLACK_TOKEN"`, `"oauth:google:gmail.readonly"`, `"workflow:classifier"`, `"intelligence:anthropic"`} {
		if !strings.Contains(out, s) {
			t.Errorf("missing %s", s)
		}
	}
	if strings.Contains(out, "unused.example.com") {
		t.Error("a class the workflow does not use contributed needs")
	}
	// Deterministic across runs.
	_, again, _ := runInProcess("needs", "--needs", filepath.Join(root, "testdata", "needs", "extra.toml"), wf)
	if again != out {
		t.Error("output not deterministic")
	}
}

func TestNeedsErrors(t *testing.T) {
	root := filepath.Join("..", "..")
	wf := filepath.Join(root, "examples", "classifier", "workflow.toml")
	if code, _, e := runInProcess("needs", wf, "--needs", filepath.Join(root, "testdata", "needs", "conflict.toml")); code != exitFailed || !strings.Contains(e, "/srv/data") {
		t.Errorf("conflict: exit %d %q", code, e)
	}
	if code, _, e := runInProcess("needs", wf, "--needs", "/nonexistent/catalog.toml"); code != exitUsage || !strings.Contains(e, "catalog") {
		t.Errorf("missing catalog: exit %d %q", code, e)
	}
	if code, _, _ := runInProcess("needs"); code != exitUsage {
		t.Errorf("no args: exit %d", code)
	}
	if code, _, e := runInProcess("needs", "/nonexistent/wf.toml"); code != exitUsage || !strings.Contains(e, "wf.toml") {
		t.Errorf("missing workflow: exit %d %q", code, e)
	}
}
