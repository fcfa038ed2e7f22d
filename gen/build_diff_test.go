package gen_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/kilnworks/kiln/gen"
	"github.com/kilnworks/kiln/gen/fixture"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/testtool"
)

// diffSpec is the part of a fixture.toml the differential test uses; the
// rest ([expected], ...) is the fixture runner's business.
type diffSpec struct {
	Start       string                `toml:"start"`
	DryRun      bool                  `toml:"dry_run"`
	TimeoutSecs int                   `toml:"timeout_secs"`
	Trigger     struct{ Payload any } `toml:"trigger"`
	Mocks       map[string]any        `toml:"mocks"`
	Setup       struct {
		Dirs     []string          `toml:"dirs"`
		Files    map[string]string `toml:"files"`
		Symlinks map[string]string `toml:"symlinks"`
		Env      map[string]string `toml:"env"`
	} `toml:"setup"`
	Expected struct {
		LoadErrorContains string `toml:"load_error_contains"`
	} `toml:"expected"`
}

// diffCase is one fixture prepared for both runners.
type diffCase struct {
	name, dir, tmp string
	spec           diffSpec
	plan           *gen.Plan
	pkg            string // package directory in the shared module
	bin            string
}

// TestSealedMatchesKilnRun builds a sealed binary for every fixture of the
// repository (fixture.Folders) and runs it and `kiln run` on the
// fixture's TOML with the same flags, input and disk: exit code, outcome
// JSON and run record (trace included) must be the same. Fixtures that
// need mocked intelligence or MCP (which a sealed binary cannot take) or
// that expect the workflow to be refused at load are skipped.
func TestSealedMatchesKilnRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary per fixture")
	}
	folders, err := fixture.Folders(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	fixtures, err := fixture.Discover(folders...)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var cases []*diffCase
	skipped := map[string]string{}
	for i, f := range fixtures {
		c, why := prepareDiffCase(t, f, filepath.Join(work, "tmp", fmt.Sprint(i)))
		if why != "" {
			skipped[f.Name] = why
			continue
		}
		c.pkg = fmt.Sprintf("fx%03d", i)
		cases = append(cases, c)
	}
	t.Logf("%d fixtures compared, %d skipped", len(cases), len(skipped))
	for _, name := range sortedNames(skipped) {
		t.Logf("skip %s: %s", name, skipped[name])
	}
	if len(cases) < len(fixtures)/2 {
		t.Fatalf("only %d of %d fixtures can be compared", len(cases), len(fixtures))
	}

	kiln := buildKiln(t)
	buildSealed(t, filepath.Join(work, "mod"), filepath.Join(work, "bin"), cases)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sealed := runDiffCase(t, c, []string{c.bin})
			cli := runDiffCase(t, c, []string{kiln, "run", filepath.Join(c.dir, fixture.WorkflowFile)})
			if sealed.code != cli.code {
				t.Errorf("exit code: sealed %d, kiln run %d\nsealed stderr: %s\nkiln stderr: %s", sealed.code, cli.code, sealed.stderr, cli.stderr)
			}
			if !reflect.DeepEqual(sealed.outcome, cli.outcome) {
				t.Errorf("outcome differs\nsealed:   %s\nkiln run: %s", sealed.stdout, cli.stdout)
			}
			if !reflect.DeepEqual(sealed.record, cli.record) {
				a, _ := json.Marshal(sealed.record)
				b, _ := json.Marshal(cli.record)
				t.Errorf("run record differs\nsealed:   %s\nkiln run: %s", a, b)
			}
			if sealed.record == nil {
				t.Errorf("no run record written (stderr %s)", sealed.stderr)
			}
		})
	}
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// prepareDiffCase reads a fixture; a non-empty reason means skip it.
func prepareDiffCase(t *testing.T, f fixture.Fixture, tmp string) (*diffCase, string) {
	dir, err := filepath.Abs(f.Dir)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, fixture.SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("${FIXTURE_TMP}", tmp, "${FIXTURE_DIR}", dir).Replace(string(raw))
	c := &diffCase{name: f.Name, dir: dir, tmp: tmp}
	if _, err := toml.Decode(text, &c.spec); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	switch {
	case len(c.spec.Mocks) > 0:
		return nil, "uses mocks a sealed binary cannot take"
	case c.spec.Expected.LoadErrorContains != "":
		return nil, "expects the workflow to be refused at load"
	}
	wf, err := gen.Load(filepath.Join(dir, fixture.WorkflowFile), gen.LoadOptions{})
	if err != nil {
		return nil, "does not load: " + err.Error()
	}
	c.plan, err = gen.NewPlan(wf, gen.PlanOptions{KilnVersion: "test"})
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return c, ""
}

var (
	kilnOnce sync.Once
	kilnBin  string
	kilnErr  error
)

// buildKiln builds the kiln command once per test process.
func buildKiln(t *testing.T) string {
	t.Helper()
	kilnOnce.Do(func() {
		dir, err := testtool.ProcessDir("kiln-cli-")
		if err != nil {
			kilnErr = err
			return
		}
		processDirs = append(processDirs, dir)
		kilnBin = filepath.Join(dir, "kiln")
		cmd := exec.Command("go", "build", "-o", kilnBin, "./cmd/kiln")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			kilnErr = fmt.Errorf("build kiln: %v\n%s", err, out)
		}
	})
	if kilnErr != nil {
		t.Fatal(kilnErr)
	}
	return kilnBin
}

// buildSealed generates every case into one module and builds them with
// one go command per distinct tag set, so the toolchain compiles shared
// packages once and links in parallel.
func buildSealed(t *testing.T, modDir, binDir string, cases []*diffCase) {
	// One go build for every case: no build tags, so one package set each.
	args := []string{"build", "-trimpath", "-o", binDir + string(filepath.Separator)}
	for _, c := range cases {
		out, err := gen.Emit(c.plan, gen.EmitOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := gen.WriteOutput(filepath.Join(modDir, c.pkg), out); err != nil {
			t.Fatal(err)
		}
		args = append(args, "./"+c.pkg)
		c.bin = filepath.Join(binDir, c.pkg)
	}
	gomod, gosum, err := gen.ModuleFiles(cases[0].plan, "kiln.local/diff", kilnSource(t), repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(modDir, "go.mod"), gomod)
	writeFile(t, filepath.Join(modDir, "go.sum"), gosum)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	goRun(t, modDir, nil, args...)
}

type diffRun struct {
	code           int
	stdout, stderr string
	outcome        map[string]any
	record         map[string]any
}

// runDiffCase prepares the fixture's disk afresh and runs argv on it.
func runDiffCase(t *testing.T, c *diffCase, argv []string) diffRun {
	t.Helper()
	if err := os.RemoveAll(c.tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	s := c.spec.Setup
	for _, d := range s.Dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range runtime.SortedKeys(s.Files) {
		writeFile(t, p, []byte(s.Files[p]))
	}
	for _, link := range runtime.SortedKeys(s.Symlinks) {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(s.Symlinks[link], link); err != nil {
			t.Fatal(err)
		}
	}
	side := t.TempDir() // input and record live outside the fixture's disk
	input := filepath.Join(side, "input.json")
	payload, err := json.Marshal(c.spec.Trigger.Payload)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, input, payload)
	record := filepath.Join(side, "record.json")
	args := append(argv[1:], "--start", c.spec.Start, "--input", input, "--record", record,
		"--state-dir", filepath.Join(c.tmp, "state"), "--quiet")
	if c.spec.DryRun {
		args = append(args, "--dry-run")
	}
	if c.spec.TimeoutSecs > 0 {
		args = append(args, "--timeout-secs", fmt.Sprint(c.spec.TimeoutSecs))
	}
	cmd := exec.Command(argv[0], args...)
	// Run where the workflow lives: relative paths (a [[secrets]] file)
	// then mean the same to the sealed binary as to kiln run, which
	// resolves them against the workflow's directory.
	cmd.Dir = c.dir
	cmd.Env = os.Environ()
	for _, k := range runtime.SortedKeys(s.Env) {
		cmd.Env = append(cmd.Env, k+"="+s.Env[k])
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := diffRun{}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", argv[0], err)
		}
		r.code = ee.ExitCode()
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &r.outcome); err != nil {
			t.Errorf("%s: stdout is not JSON: %q", argv[0], stdout.String())
		}
		delete(r.outcome, "run_id")     // random per run
		delete(r.outcome, "elapsed_ms") // wall clock
	}
	if data, err := os.ReadFile(record); err == nil {
		if err := json.Unmarshal(data, &r.record); err != nil {
			t.Errorf("%s: record is not JSON: %v", argv[0], err)
		}
		normalizeRecord(r.record)
	}
	return r
}

// normalizeRecord drops what differs between any two runs: ids and wall
// clock times (durations measured inside node outputs included).
func normalizeRecord(rec map[string]any) {
	delete(rec, "execution_id")
	delete(rec, "wall_ms")
	delete(rec, "started_at")
	if detail, ok := rec["detail"].(map[string]any); ok {
		delete(detail, "run_id")
		delete(detail, "elapsed_ms")
	}
	trace, _ := rec["trace"].(map[string]any)
	delete(trace, "execution_id")
	dropTimes(rec) // the trace and the tape's attempts
	// Children of parallel and map run concurrently, so the tape lists
	// their attempts and interactions in the order they happened: compare them as a set.
	for _, key := range []string{"attempts", "interactions"} {
		list, _ := rec[key].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok {
				delete(m, "seq")
			}
		}
		sort.Slice(list, func(i, j int) bool {
			a, _ := json.Marshal(list[i])
			b, _ := json.Marshal(list[j])
			return string(a) < string(b)
		})
	}
}

func dropTimes(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "elapsed_ms")
		delete(x, "duration_ms")
		delete(x, "start_ms")
		for _, e := range x {
			dropTimes(e)
		}
	case []any:
		for _, e := range x {
			dropTimes(e)
		}
	}
}
