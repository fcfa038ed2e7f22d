package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/deploy"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// The tests seal a few examples once per test process into directories
// removed when the process ends.
var (
	buildMu   sync.Mutex
	built     = map[string]*builtBin{}
	buildDirs []string
)

type builtBin struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range buildDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// sealed returns the sealed binary of examples/<name> (or, for a name
// holding a slash, of that workflow under testdata), built on first use.
func sealed(t *testing.T, name string) string {
	t.Helper()
	buildMu.Lock()
	b, ok := built[name]
	if !ok {
		b = &builtBin{}
		built[name] = b
	}
	buildMu.Unlock()
	root := testtool.RepoRoot(t)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "kiln-deploy-")
		if err != nil {
			b.err = err
			return
		}
		buildMu.Lock()
		buildDirs = append(buildDirs, dir)
		buildMu.Unlock()
		wf := filepath.Join(root, "examples", name, "workflow.toml")
		if filepath.Base(name) != name {
			wf = filepath.Join(root, "gen", "deploy", name, "workflow.toml")
		}
		b.path = filepath.Join(dir, filepath.Base(name))
		_, b.err = gen.Build(context.Background(), gen.BuildOptions{Workflow: wf, Output: b.path, KilnSource: root})
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", name, b.err)
	}
	return b.path
}

// spec reads and derives the spec of a sealed example.
func spec(t *testing.T, name string) (*deploy.Seal, *deploy.Spec) {
	t.Helper()
	s, err := deploy.Read(sealed(t, name))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := deploy.Derive(s)
	if err != nil {
		t.Fatal(err)
	}
	return s, sp
}
