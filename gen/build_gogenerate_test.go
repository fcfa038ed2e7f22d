package gen_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

const exampleModulePath = "example.com/kiln-gogenerate"

func gogenerateDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "examples", "gogenerate")
}

// kilnSumLine matches the kiln_sum of a generated manifest (in
// manifest.json and in manifest_gen.go's string): it names the kiln source
// tree, which changes with every edit of kiln, so the committed example
// is compared without it.
var kilnSumLine = regexp.MustCompile(`(kiln_sum\\?": \\?")h1:[A-Za-z0-9+/=]+`)

func withoutKilnSum(b []byte) []byte {
	return kilnSumLine.ReplaceAll(b, []byte(`${1}h1:...`))
}

// TestGoGenerateExample does what a user does: in a copy of the example
// module, `go generate ./...` (running kiln through `go tool`), then `go
// build ./agent`, then runs the program. The regenerated package must be
// identical to the committed one (what a CI diff check relies on).
func TestGoGenerateExample(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles kiln through go tool")
	}
	work := filepath.Join(t.TempDir(), "user")
	copyTree(t, gogenerateDir(t), work)
	if err := os.RemoveAll(filepath.Join(work, "agent")); err != nil {
		t.Fatal(err)
	}
	// The example's module (TestPipelineRecipe keeps it the recipe's), with
	// kiln replaced by this tree wherever the copy is.
	writeFile(t, filepath.Join(work, "go.mod"), exampleModule(t, mustRead(t, filepath.Join(gogenerateDir(t), "go.mod")), repoRoot(t)))

	goRun(t, work, nil, "generate", "./...")
	generated := readTree(t, filepath.Join(work, "agent"))
	if *update {
		committed := filepath.Join(gogenerateDir(t), "agent")
		if err := os.RemoveAll(committed); err != nil {
			t.Fatal(err)
		}
		copyTree(t, filepath.Join(work, "agent"), committed)
	}
	committed := readTree(t, filepath.Join(gogenerateDir(t), "agent"))
	if len(generated) == 0 {
		t.Fatal("go generate wrote nothing into ./agent")
	}
	for name, data := range generated {
		if !bytes.Equal(withoutKilnSum(committed[name]), withoutKilnSum(data)) {
			t.Errorf("agent/%s differs from the committed one (go test ./gen -run GoGenerateExample -update)", name)
		}
	}
	for name := range committed {
		if _, ok := generated[name]; !ok {
			t.Errorf("agent/%s is committed but no longer generated", name)
		}
	}

	bin := filepath.Join(t.TempDir(), "greeter")
	goRun(t, work, nil, "build", "-o", bin, "./agent")
	input := filepath.Join(t.TempDir(), "in.json")
	writeFile(t, input, []byte(`{"name":"Ada"}`))
	out, err := exec.Command(bin, "--input", input, "--quiet").Output()
	if err != nil {
		t.Fatalf("greeter: %v\n%s", err, out)
	}
	var outcome struct {
		Status     string `json:"status"`
		FinalValue struct {
			Value string `json:"value"`
		} `json:"final_value"`
	}
	if err := json.Unmarshal(out, &outcome); err != nil || outcome.Status != "completed" || outcome.FinalValue.Value != "Hello, Ada!" {
		t.Errorf("outcome %s (%v)", out, err)
	}

	// kiln build also works from this user module, outside kiln's tree:
	// kiln finds its source through the replace line it was built with.
	sealed := filepath.Join(t.TempDir(), "sealed")
	goRun(t, work, []string{"KILN_SOURCE="}, "tool", "kiln", "build", "workflow.toml", "-o", sealed)
	if out, err := exec.Command(sealed, "manifest").Output(); err != nil || !strings.Contains(string(out), `"name": "gogenerate"`) {
		t.Errorf("sealed manifest: %v\n%s", err, out)
	}

	// Both are pruned, and kiln inspect proves it from what each links:
	// the generated package imports the manifest's families and registers
	// the kinds the workflow uses (no family registers one from init), so
	// both builds link exactly the same packages, with no build tags.
	trimmed := filepath.Join(t.TempDir(), "greeter-trimpath")
	goRun(t, work, nil, "build", "-trimpath", "-o", trimmed, "./agent")
	plain, err := gen.Inspect(trimmed)
	if err != nil {
		t.Fatal(err)
	}
	built, err := gen.Inspect(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if !plain.OK() || !built.OK() {
		t.Fatalf("kiln inspect: go build problems %v, kiln build problems %v", plain.Problems, built.Problems)
	}
	// The manifest lists control (every binary may use its kinds); this
	// workflow uses none of them, so neither build links it.
	families := plain.Manifest.FamilyIDs()
	if want := []string{"control", "data"}; !slices.Equal(families, want) || !slices.Equal(built.Manifest.FamilyIDs(), want) {
		t.Errorf("manifest families: go generate %v, kiln build %v, want %v", families, built.Manifest.FamilyIDs(), want)
	}
	if want := []string{"data"}; !slices.Equal(plain.LinkedFamilies, want) || !slices.Equal(built.LinkedFamilies, want) {
		t.Errorf("linked families: go build %v, kiln build %v, want %v", plain.LinkedFamilies, built.LinkedFamilies, want)
	}
	if len(plain.Packages) == 0 || !slices.Equal(built.Packages, plain.Packages) {
		t.Errorf("linked packages differ:\nkiln build:            %v\ngo build -trimpath:    %v", built.Packages, plain.Packages)
	}
	if len(built.Tags) != 0 {
		t.Errorf("kiln build used build tags %v", built.Tags)
	}
}
