package shell

import (
	"testing"

	"github.com/kilnworks/kiln/runtime"
)

// BenchmarkShellRunTrue is one shell_run of /bin/true through the engine:
// the cost of a spawn, supervisor included.
func BenchmarkShellRunTrue(b *testing.B) {
	p := program(b, node("/bin/true", ""))
	for b.Loop() {
		if rep, _ := runIt(b, p, nil, runtime.RunOptions{}); rep.Outcome.Status != runtime.StatusCompleted {
			b.Fatalf("outcome %+v", rep.Outcome)
		}
	}
}
