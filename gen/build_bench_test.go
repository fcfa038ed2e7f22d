package gen_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

func buildOnce(b *testing.B, workflow, out string) *gen.BuildResult {
	b.Helper()
	res, err := gen.Build(context.Background(), gen.BuildOptions{Workflow: workflow, Output: out, KilnSource: repoRoot(b)})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkSealedSize reports the size of the sealed hello (target <= 3.0
// MiB) and of the all-capabilities workflow, and their ratio (target >=
// 4). Run with -benchtime 1x: each iteration builds both.
func BenchmarkSealedSize(b *testing.B) {
	dir := b.TempDir()
	var hello, all *gen.BuildResult
	for b.Loop() {
		hello = buildOnce(b, helloWorkflow(b), filepath.Join(dir, "hello"))
		all = buildOnce(b, filepath.Join(repoRoot(b), "testdata", "golden", "allcaps", "workflow.toml"), filepath.Join(dir, "allcaps"))
	}
	const mib = 1 << 20
	b.ReportMetric(float64(hello.Size)/mib, "hello-MiB")
	b.ReportMetric(float64(all.Size)/mib, "allcaps-MiB")
	b.ReportMetric(float64(all.Size)/float64(hello.Size), "allcaps/hello")
	if hello.Size > maxHelloBytes {
		b.Errorf("sealed hello is %.2f MiB, target <= 3.25 MiB", float64(hello.Size)/mib)
	}
}

// BenchmarkRebuildUnchanged is `kiln build` of an unchanged workflow with
// a warm build cache: load, generate into a fresh module, go build
// (target <= 1 s per operation).
func BenchmarkRebuildUnchanged(b *testing.B) {
	out := filepath.Join(b.TempDir(), "hello")
	buildOnce(b, helloWorkflow(b), out) // warm the cache
	for b.Loop() {
		buildOnce(b, helloWorkflow(b), out)
	}
}
