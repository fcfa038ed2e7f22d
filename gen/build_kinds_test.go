package gen_test

import (
	"debug/elf"
	"debug/gosym"
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
	for _, unused := range []string{"fs.prepareReadFile", "fs.prepareCreateDir", "data.prepareDiffCompute", "data.prepareParseJSON",
		"control.prepareRespond", "control.prepareSwitch", "control.preparePause"} {
		if funcs[caps+unused] {
			t.Errorf("hello links %s, the handler of a kind it does not use", unused)
		}
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
