package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestListCheckpointsSkipsDirsAndTempFiles: ListCheckpoints reads names
// only, so a directory named like a checkpoint and a temp file of
// WriteFileAtomic are left out without being reported.
func TestListCheckpointsSkipsDirsAndTempFiles(t *testing.T) {
	dReset()
	dir := t.TempDir()
	p := dProgram(t, "d8l", []workflow.Node{dNode("a", "d_step"), dNode("p", "d_pause"), dNode("b", "d_step")}, chainEdges("a", "p", "b"))
	(&Engine{StateDir: dir}).Run(context.Background(), p, RunOptions{ExecutionID: "r-1"})
	runs := filepath.Join(dir, "runs")
	if err := os.Mkdir(filepath.Join(runs, "r-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, ".r-2.json.tmp-1"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	infos, bad, err := ListCheckpoints(dir)
	if err != nil || len(bad) > 0 || len(infos) != 1 || infos[0].RunID != "r-1" {
		t.Fatalf("list %+v, bad %v, err %v", infos, bad, err)
	}
}
