package testtool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcessDirInsideGoWork: under go test the folder is inside the go
// command's work folder (which the go command removes), never directly in
// the temporary folder where a killed run would leave it.
func TestProcessDirInsideGoWork(t *testing.T) {
	dir, err := ProcessDir("kiln-processdir-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	parent := filepath.Dir(dir)
	if parent == filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(filepath.Dir(parent)), "go-build") {
		t.Errorf("ProcessDir = %s, want it inside the go command's work folder", dir)
	}
}
