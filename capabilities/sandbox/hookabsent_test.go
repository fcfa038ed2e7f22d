package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// hookSymbol is the function that switches kiln's resolution off in test
// builds (capabilities/internal/beneath/testhooks.go). Go keeps every
// linked function's name in the binary, stripped or not.
const hookSymbol = "capabilities/internal/beneath.SwitchChecksOffForTest"

// TestSealedBinaryHasNoHook builds the sealed hello with kiln (it writes
// a file, so it links package beneath) and finds no trace of the hook.
func TestSealedBinaryHasNoHook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a sealed binary")
	}
	root := testtool.RepoRoot(t)
	res, err := gen.Build(context.Background(), gen.BuildOptions{
		Workflow:   filepath.Join(root, "examples/hello/workflow.toml"),
		Output:     filepath.Join(t.TempDir(), "hello"),
		KilnSource: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(res.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(bin), "capabilities/internal/beneath.Open") {
		t.Fatal("the sealed hello does not link package beneath: this check proves nothing")
	}
	for _, trace := range []string{hookSymbol, "beneath.checksOff", "kiln_testhooks"} {
		if strings.Contains(string(bin), trace) {
			t.Errorf("the sealed hello contains %q", trace)
		}
	}
}
