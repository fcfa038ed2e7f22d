package gen_test

import (
	"bytes"
	"debug/elf"
	"debug/gosym"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSealedLinksOnlyUsedKinds: the sealed hello holds the handlers of
// the node kinds it uses and not those of the other kinds of the same
// families (the function table survives stripping).
func TestSealedLinksOnlyUsedKinds(t *testing.T) {
	funcs := funcNames(t, helloBinary(t).Binary)
	const caps = "github.com/kilnworks/kiln/capabilities/"
	for _, used := range []string{"fs.prepareWriteFile", "env.prepareReadEnv", "data.prepareTemplateRender", "control.prepareTerminate"} {
		if !funcs[caps+used] {
			t.Errorf("hello lacks %s, the handler of a kind it uses", used)
		}
	}
	for _, unused := range []string{"fs.prepareReadFile", "fs.prepareCreateDir", "data.prepareDiffCompute", "data/parsejson.prepare",
		"control.prepareRespond", "control.prepareSwitch", "control.preparePause"} {
		if funcs[caps+unused] {
			t.Errorf("hello links %s, the handler of a kind it does not use", unused)
		}
	}
}

// TestPrunedBuildWithoutAKindFailsClosed: a pruned build whose program
// does not register a kind its workflow uses (a hand-edited
// capabilities_gen.go) refuses to run, naming the kind, and writes
// nothing; the families do not fall back to registering it themselves.
func TestPrunedBuildWithoutAKindFailsClosed(t *testing.T) {
	plan := load(t, helloWorkflow(t), false)
	modDir, _ := genModule(t, plan, "main")
	capsFile := filepath.Join(modDir, "capabilities_gen.go")
	src := mustRead(t, capsFile)
	line := []byte("\truntime.RegisterNode(fs.KindWriteFile)\n")
	if !bytes.Contains(src, line) {
		t.Fatalf("capabilities_gen.go does not register write_file:\n%s", src)
	}
	src = bytes.Replace(src, line, nil, 1)
	src = bytes.Replace(src, []byte("\tfs \"github.com/kilnworks/kiln/capabilities/fs\""), []byte("\t_ \"github.com/kilnworks/kiln/capabilities/fs\""), 1)
	writeFile(t, capsFile, src)
	bin := filepath.Join(t.TempDir(), "hello")
	goRun(t, modDir, nil, "build", "-trimpath", "-o", bin, ".") // no tags: what go generate users build

	// Where the policy lets hello write (TestBuildHello's positive
	// control writes there).
	out := filepath.Join("/tmp/kiln-hello", "gen-test-"+filepath.Base(t.TempDir())+".txt")
	t.Cleanup(func() { os.Remove(out) })
	input := filepath.Join(t.TempDir(), "input.json")
	writeFile(t, input, []byte(`{"output_path":"`+out+`"}`))
	cmd := exec.Command(bin, "--input", input, "--quiet")
	cmd.Env = append(os.Environ(), "USER=sealed-test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err == nil || !strings.Contains(string(stdout)+stderr.String(), "no handler in this binary for node kind write_file (node save)") {
		t.Fatalf("run without write_file registered: %v\nstdout %s\nstderr %s", err, stdout, stderr.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the run wrote %s (%v)", out, err)
	}
}

// funcNames lists the functions in the Go function table of a binary.
func funcNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		t.Fatalf("%s has no .gopclntab or .text", path)
	}
	data, err := pcln.Data()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, fn := range tab.Funcs {
		names[fn.Name] = true
	}
	return names
}
