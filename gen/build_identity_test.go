package gen_test

import (
	"bytes"
	"debug/buildinfo"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// copySource copies kiln's source tree (what TreeHash hashes: no dot
// folders, nested modules or compiled programs) to dst.
func copySource(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			if p != src {
				if n := d.Name(); strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		// A git worktree's .git is a file naming the repository: a copy
		// of it would make git commands in dst commit to that repository.
		if !d.Type().IsRegular() || d.Name() == ".git" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, []byte("\x7fELF")) {
			return nil // a compiled program left in the tree
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func runIn(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOWORK=off", "CGO_ENABLED=0"}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSealedBinaryIndependentOfHowKilnWasBuilt builds kiln two ways from
// one clean git checkout: with VCS stamping (its build info then carries a
// pseudo-version) and with -buildvcs=false ("(devel)"). Both must seal the
// same workflow into byte-identical binaries whose manifest names kiln by
// its source: "devel" and the tree's h1: dirhash.
func TestSealedBinaryIndependentOfHowKilnWasBuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles kiln twice")
	}
	git := testtool.Command(t, "git")
	tree := filepath.Join(t.TempDir(), "kiln")
	copySource(t, repoRoot(t), tree)
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z", "HOME=" + t.TempDir()}
	runIn(t, tree, gitEnv, git, "init", "-q")
	runIn(t, tree, gitEnv, git, "add", "-A")
	runIn(t, tree, gitEnv, git, "commit", "-q", "-m", "snapshot")

	bins := t.TempDir()
	stamped, plain := filepath.Join(bins, "kiln-vcs"), filepath.Join(bins, "kiln-novcs")
	runIn(t, tree, nil, "go", "build", "-trimpath", "-buildvcs=true", "-o", stamped, "./cmd/kiln")
	runIn(t, tree, nil, "go", "build", "-trimpath", "-buildvcs=false", "-o", plain, "./cmd/kiln")
	v1, v2 := mainVersion(t, stamped), mainVersion(t, plain)
	if v1 == v2 || !strings.HasPrefix(v1, "v0.0.0-") {
		t.Fatalf("the two kilns should differ in how they were built: %q and %q", v1, v2)
	}

	wantSum, err := gen.TreeHash(tree)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var sealed [][]byte
	for _, kiln := range []string{stamped, plain} {
		out := filepath.Join(t.TempDir(), "hello")
		runIn(t, work, nil, kiln, "build", helloWorkflow(t), "-o", out, "--kiln-source", tree)
		data := mustRead(t, out)
		sealed = append(sealed, data)
		raw, err := manifest.Find(data)
		if err != nil {
			t.Fatal(err)
		}
		m, err := manifest.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if m.KilnVersion != "devel" || m.KilnSum != wantSum {
			t.Errorf("%s: manifest names kiln %s %s, want devel %s", filepath.Base(kiln), m.KilnVersion, m.KilnSum, wantSum)
		}
	}
	if !bytes.Equal(sealed[0], sealed[1]) {
		t.Error("the sealed binaries differ with how kiln was built")
	}
}

func mainVersion(t *testing.T, bin string) string {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bi.Main.Version
}

// TestTreeHashIgnoresBuildLeftovers: the identity of a source tree is its
// source: a compiled program or a dot folder in it changes nothing, an
// edited source file does.
func TestTreeHashIgnoresBuildLeftovers(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), []byte("module "+gen.KilnModule+"\n"))
	writeFile(t, filepath.Join(dir, "a.go"), []byte("package a\n"))
	before, err := gen.TreeHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "kiln"), []byte("\x7fELF\x02\x01\x01 a program"))
	writeFile(t, filepath.Join(dir, ".cache", "x"), []byte("cache"))
	writeFile(t, filepath.Join(dir, "nested", "go.mod"), []byte("module example.com/nested\n"))
	if after, _ := gen.TreeHash(dir); after != before {
		t.Errorf("leftovers changed the hash: %s, %s", before, after)
	}
	writeFile(t, filepath.Join(dir, "a.go"), []byte("package a // edited\n"))
	if after, _ := gen.TreeHash(dir); after == before || !strings.HasPrefix(after, "h1:") {
		t.Errorf("an edit did not change the hash: %s, %s", before, after)
	}
}
