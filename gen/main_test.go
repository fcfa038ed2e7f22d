package gen_test

import (
	"os"
	"testing"
)

// processDirs are temporary folders shared by every test of the process
// (the kiln CLI and the sealed hello, each built once); TestMain removes
// them when the tests are done.
var processDirs []string

// helloOutDir is where the sealed hello's policy lets it write; the tests
// remove their own files from it, and TestMain the folder if they made it.
const helloOutDir = "/tmp/kiln-hello"

func TestMain(m *testing.M) {
	_, err := os.Stat(helloOutDir)
	helloOutExisted := err == nil
	code := m.Run()
	for _, d := range processDirs {
		os.RemoveAll(d)
	}
	if !helloOutExisted {
		os.Remove(helloOutDir) // only when empty: never someone else's files
	}
	os.Exit(code)
}
