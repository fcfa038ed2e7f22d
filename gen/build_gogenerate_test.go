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
	// the plain go build links exactly the manifest's families (its
	// imports), kiln build no more than those (-tags kiln_custom also
	// leaves out the unused node kinds, and a family with none used).
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
	families := plain.Manifest.FamilyIDs()
	if !slices.Equal(built.Manifest.FamilyIDs(), families) || !slices.Equal(plain.LinkedFamilies, families) {
		t.Errorf("families: manifests %v / %v, go build links %v", families, built.Manifest.FamilyIDs(), plain.LinkedFamilies)
	}
	for _, id := range built.LinkedFamilies {
		if !slices.Contains(families, id) {
			t.Errorf("kiln build links family %s beyond the manifest %v", id, families)
		}
	}
	for _, p := range built.Packages {
		if !slices.Contains(plain.Packages, p) {
			t.Errorf("kiln build links %s, which the plain go build does not", p)
		}
	}
}
