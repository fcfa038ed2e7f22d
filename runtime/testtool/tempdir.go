package testtool

import (
	"os"
	"path/filepath"
	"strings"
)

// ProcessDir makes a folder shared by every test of the process (a kiln
// binary built once, say), to be removed by TestMain. Under `go test` it
// goes inside the go command's own work folder, next to the test binary
// ($WORK/b001): the go command removes that folder when the test ends,
// even when a timeout or a killed test binary skipped TestMain, so no run
// leaves anything in the temporary folder. Otherwise it is a new folder
// in os.TempDir.
func ProcessDir(prefix string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		work := filepath.Dir(filepath.Dir(exe)) // $WORK of $WORK/b001/pkg.test
		// go-build* wherever GOTMPDIR puts it (mutation tools set it).
		if strings.HasPrefix(filepath.Base(work), "go-build") {
			return os.MkdirTemp(filepath.Dir(exe), prefix)
		}
	}
	return os.MkdirTemp("", prefix)
}
