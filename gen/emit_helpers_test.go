package gen_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// repoRoot is the kiln source tree this test runs in.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Dir(filepath.Dir(file))
}

func kilnSource(t testing.TB) *gen.KilnSource {
	t.Helper()
	src, err := gen.FindKilnSource(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// load loads a workflow for the generator.
func load(t testing.TB, path string, skipValidate bool) *gen.Plan {
	t.Helper()
	wf, err := gen.Load(path, gen.LoadOptions{SkipValidate: skipValidate})
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	plan, err := gen.NewPlan(wf, gen.PlanOptions{KilnVersion: "test"})
	if err != nil {
		t.Fatalf("plan %s: %v", path, err)
	}
	return plan
}

// genModule generates the program of plan as package pkg into a fresh
// standalone module (go.mod replacing kiln with this tree) and returns the
// module directory and the package's directory inside it.
func genModule(t testing.TB, plan *gen.Plan, pkg string) (modDir, pkgDir string) {
	t.Helper()
	modDir = t.TempDir()
	pkgDir = modDir
	if pkg != "main" {
		pkgDir = filepath.Join(modDir, pkg)
	}
	out, err := gen.Emit(plan, gen.EmitOptions{Package: pkg})
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.WriteOutput(pkgDir, out); err != nil {
		t.Fatal(err)
	}
	gomod, gosum, err := gen.ModuleFiles(plan, "kiln.local/test/"+pkg, kilnSource(t), repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(modDir, "go.mod"), gomod)
	writeFile(t, filepath.Join(modDir, "go.sum"), gosum)
	return modDir, pkgDir
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goRun runs the go command in dir with CGO off and no workspace.
func goRun(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String()
}

// readTree reads every file below dir, keyed by slash path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// copyTree copies the files below src into dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	for name, data := range readTree(t, src) {
		writeFile(t, filepath.Join(dst, filepath.FromSlash(name)), data)
	}
}
