// Package testtool finds the external programs that interop tests drive
// (cosign, Debian commands such as chromium or systemd-analyze) and decides
// what a missing one means: a loud skip on a developer machine, a failure
// under CI=true, where `make test` installs every tool first. Only tests
// import it.
package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where a missing tool
// or privilege is a failure, never a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips the test with the reason, or fails it under CI=true.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true: "+format, args...)
	}
	t.Skipf("SKIP: "+format, args...)
}

// RepoRoot returns the kiln checkout the test runs in (the nearest folder
// up from the working directory that holds go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// Command returns the path of a command on PATH (a Debian package that
// `make deb-tools` installs), or reports it missing.
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s is not installed (run `make tools`, as root for Debian packages)", name)
	}
	return p
}

// CacheBin returns the path of a tool `make tools` installs into
// .cache/bin (cosign), or reports it missing.
func CacheBin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), ".cache", "bin", name)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "%s is not installed at %s (run `make tools`)", name, p)
	}
	return p
}
