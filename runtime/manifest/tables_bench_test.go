package manifest_test

import (
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/manifest"
)

// BenchmarkTablesDigest measures what a sealed binary adds to every
// start-up: digesting its static tables (the golden workflows the emitter tests
// compile; full sets every field and has children and assets).
func BenchmarkTablesDigest(b *testing.B) {
	golden := filepath.Join("..", "..", "testdata", "golden")
	for _, c := range []struct{ name, path string }{
		{"hello", filepath.Join(golden, "hello", "input", "workflow.toml")},
		{"allcaps", filepath.Join(golden, "allcaps", "workflow.toml")},
		{"full", filepath.Join(golden, "full", "input", "workflow.toml")}, // sets every field, so it is not valid
	} {
		wf, err := gen.Load(c.path, gen.LoadOptions{SkipValidate: c.name == "full"})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := manifest.TablesDigest(wf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
