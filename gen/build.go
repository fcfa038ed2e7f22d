package gen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/kilnworks/kiln/gen/supply"
	"github.com/kilnworks/kiln/runtime"
	rneeds "github.com/kilnworks/kiln/runtime/needs"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// BuildOptions tunes Build.
type BuildOptions struct {
	// Workflow is the WORKFLOW.toml to build; Loaded, when set, is used
	// instead (already loaded and validated with Load).
	Workflow string
	Loaded   *workflow.Workflow
	// Load is passed to Load.
	Load LoadOptions
	// Output is the binary to write.
	Output string
	// KilnSource is --kiln-source (see FindKilnSource).
	KilnSource string
	// Progress receives one line per step ("" = quiet).
	Progress io.Writer
	// Terminal: Progress is a terminal, so a line counting the seconds of
	// go build is redrawn in place while it runs.
	Terminal bool
	// Env is added to the go command's environment (tests).
	Env []string
	// Plan tunes NewPlan (KilnVersion; GoVersion is the toolchain's).
	Plan PlanOptions
	// Sign, when set, signs the binary and its manifest, SBOM and
	// provenance (kiln build --sign-key; see gen/supply).
	Sign signature.Signer
	// AllowBlocked builds even when a mandatory need exceeds the
	// workflow's [policy] (kiln build --allow-blocked): such a binary
	// refuses to start (exit 6) until the policy changes.
	AllowBlocked bool
}

// BlockedError refuses a build whose binary could never start: mandatory
// effective needs the workflow's own [policy] does not allow (an approval
// cannot widen the compiled policy, so preflight blocks every launch).
type BlockedError struct {
	Workflow string
	Needs    []rneeds.Need // each with BeyondPolicy set
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %q: the binary could never start: %d mandatory need(s) exceed its [policy]:", e.Workflow, len(e.Needs))
	for _, n := range e.Needs {
		fmt.Fprintf(&b, "\n  %s (from %s): %s", n.ID, strings.Join(n.Sources, ", "), n.BeyondPolicy)
	}
	b.WriteString("\nwiden [policy], make the need optional in its needs catalog, or pass --allow-blocked to build it anyway")
	return b.String()
}

// blockedNeeds returns the mandatory needs beyond the plan's policy.
func blockedNeeds(plan *Plan) []rneeds.Need {
	if plan.Needs == nil {
		return nil
	}
	var out []rneeds.Need
	for _, n := range plan.Needs.Needs {
		if n.BeyondPolicy != "" && !n.Optional {
			out = append(out, n)
		}
	}
	return out
}

// BuildResult describes a built binary.
type BuildResult struct {
	Plan      *Plan
	Binary    string // absolute path of the written binary
	SHA256    string // hex digest of the binary
	Size      int64
	Manifest  []byte // the embedded manifest JSON
	GoVersion string
	Source    *KilnSource
	Elapsed   time.Duration
}

// BuildError is a go build failure, with the module that could not be
// found when that was the cause.
type BuildError struct {
	// Missing names a module (path@version, or the package path when
	// only that is known) that is neither in the module cache nor
	// downloadable.
	Missing string
	Output  string // the go command's stderr, trimmed
	Err     error
}

func (e *BuildError) Error() string {
	if e.Missing != "" && strings.HasPrefix(e.Missing, KilnModule+"@") {
		return fmt.Sprintf("go build: kiln's own module %s is not in the module cache and cannot be downloaded (not published there, or offline): pin kiln with a replace to a checkout, vendored copy or mirror, as docs/pipelines.md (\"From a checkout, a vendored copy or an air-gapped mirror\") shows, or pass --kiln-source DIR\n%s", e.Missing, e.Output)
	}
	if e.Missing != "" {
		return fmt.Sprintf("go build: missing module %s: not in the module cache and not downloadable (offline or GOPROXY=off?); fill the module cache first (go mod download with network access)\n%s", e.Missing, e.Output)
	}
	return fmt.Sprintf("go build: %v\n%s", e.Err, e.Output)
}

func (e *BuildError) Unwrap() error { return e.Err }

// sealedModulePrefix names generated modules: the path lands in the
// binary's build info, so it must not depend on any directory.
const sealedModulePrefix = "kiln.local/sealed/"

// Build generates the sealed program of a workflow into a temporary module
// and compiles it: `go build -trimpath -buildvcs=false -ldflags='-s -w
// -buildid='` with CGO_ENABLED=0, no build tags (the generated imports prune). The
// binary depends only on its inputs and the toolchain, not on where
// anything lives.
func Build(ctx context.Context, opts BuildOptions) (*BuildResult, error) {
	start := time.Now()
	if opts.Output == "" {
		return nil, errors.New("build: no output path")
	}
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "kiln: "+format+"\n", args...)
		}
	}
	wf := opts.Loaded
	if wf == nil {
		var err error
		if wf, err = Load(opts.Workflow, opts.Load); err != nil {
			return nil, err
		}
	}
	goVersion, err := goEnv("GOVERSION")
	if err != nil {
		return nil, err
	}
	src, err := FindKilnSource(opts.KilnSource)
	if err != nil {
		return nil, err
	}
	// The manifest names kiln by its source, not by how the running kiln
	// was built (a VCS stamp or a pseudo-version would make the same
	// source give different binaries).
	kilnVersion, kilnSum := src.Identity()
	po := opts.Plan
	po.GoVersion = goVersion
	if po.KilnVersion == "" {
		po.KilnVersion = kilnVersion
	}
	plan, err := NewPlan(wf, po)
	if err != nil {
		return nil, err
	}
	if plan.Manifest.KilnVersion == kilnVersion {
		plan.Manifest.KilnSum = kilnSum
	}
	if blocked := blockedNeeds(plan); len(blocked) > 0 {
		if !opts.AllowBlocked {
			return nil, &BlockedError{Workflow: wf.Name, Needs: blocked}
		}
		progress("--allow-blocked: %d need(s) exceed the workflow's [policy]; the binary will refuse to start (exit 6)", len(blocked))
	}
	progress("workflow %s: %d nodes, families %s", wf.Name, len(wf.Nodes), strings.Join(plan.Families, ","))
	out, err := Emit(plan, EmitOptions{Package: "main"})
	if err != nil {
		return nil, err
	}

	tmp, err := os.MkdirTemp("", "kiln-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	modDir := filepath.Join(tmp, "sealed")
	// The replace line points at a fixed relative path, a link to kiln's
	// tree, so nothing about this machine's layout reaches the go.mod that
	// the build records.
	replace := "./kiln"
	if src.Replace {
		if err := os.MkdirAll(modDir, 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink(src.Dir, filepath.Join(modDir, "kiln")); err != nil {
			return nil, fmt.Errorf("link kiln's source tree: %w", err)
		}
	}
	gomod, gosum, err := ModuleFiles(plan, sealedModulePrefix+sanitizeName(wf.Name), src, replace)
	if err != nil {
		return nil, err
	}
	out.Files["go.mod"] = gomod
	out.Files["go.sum"] = gosum
	if err := WriteOutput(modDir, out); err != nil {
		return nil, err
	}
	progress("generated %d files with kiln from %s (%s)", len(out.Files), src.Dir, src.How)

	bin := filepath.Join(tmp, "bin", "sealed")
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "."}
	progress("compiling with %s: %s", goVersion, ShellJoin(append([]string{"go"}, args...)...))
	cmd := goCommand(ctx, modDir, args...)
	cmd.Env = append(cmd.Env, opts.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var stopClock func()
	if opts.Terminal && opts.Progress != nil {
		progress("the first build compiles every dependency (a few minutes); later ones reuse Go's build cache")
		stopClock = elapsedClock(opts.Progress, "kiln: go build running")
	}
	err = cmd.Run()
	if stopClock != nil {
		stopClock()
	}
	if err != nil {
		return nil, buildError(err, stderr.String())
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	dst, err := filepath.Abs(opts.Output)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	if err := runtime.WriteFileAtomic(dst, data, 0o755); err != nil {
		return nil, err
	}
	// Beside the binary: manifest, SBOM, provenance, and signatures.
	if _, err := supply.WriteArtifacts(dst, out.Files[FileManifestJSON]); err != nil {
		return nil, err
	}
	if opts.Sign != nil {
		if _, err := supply.SignArtifacts(opts.Sign, dst); err != nil {
			return nil, err
		}
		progress("signed %s and its manifest, SBOM and provenance", opts.Output)
	}
	sum := sha256.Sum256(data)
	res := &BuildResult{
		Plan:      plan,
		Binary:    dst,
		SHA256:    hex.EncodeToString(sum[:]),
		Size:      int64(len(data)),
		Manifest:  out.Files[FileManifestJSON],
		GoVersion: goVersion,
		Source:    src,
		Elapsed:   time.Since(start),
	}
	progress("wrote %s (%.2f MiB, sha256 %s) in %s", opts.Output, float64(res.Size)/(1<<20), res.SHA256, res.Elapsed.Round(time.Millisecond))
	return res, nil
}

// elapsedClock redraws "prefix Ns" on w every second until the returned
// stop is called, which erases the line.
func elapsedClock(w io.Writer, prefix string) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintf(w, "\r%s %s ", prefix, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		fmt.Fprint(w, "\r\033[K") // carriage return, erase to end of line
	}
}

// ShellQuote quotes s for a POSIX shell when it needs quoting, so a
// printed command can be pasted back as it is.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin is a command line with each word quoted by ShellQuote.
func ShellJoin(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// goCommand prepares a go command run in dir, with CGO disabled and any
// go.work of the caller ignored (the generated module stands alone); the
// rest of the environment (GOFLAGS, GOPROXY, GOMODCACHE, ...) is honoured.
func goCommand(ctx context.Context, dir string, args ...string) *exec.Cmd {
	if ctx == nil {
		ctx = context.Background()
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	return cmd
}

// Patterns of go command errors caused by a module that is not available.
var missingModule = []*regexp.Regexp{
	regexp.MustCompile(`(\S+@\S+): module lookup disabled by GOPROXY=off`),
	regexp.MustCompile(`missing go\.sum entry for module providing package (\S+)`),
	regexp.MustCompile(`missing go\.sum entry for go\.mod file; to add it:\s+go mod download (\S+)`),
	regexp.MustCompile(`no required module provides package (\S+)`),
	regexp.MustCompile(`(\S+@\S+): (?:reading|verifying) .*(?:dial|connection|no such host|GOPROXY|GOFLAGS=-mod)`),
}

// downloading matches the go command's "go: downloading M V" lines: when
// the build then fails for lack of a module, these are the ones it lacked.
var downloading = regexp.MustCompile(`(?m)^go: downloading (\S+) (\S+)$`)

func buildError(err error, stderr string) error {
	be := &BuildError{Output: strings.TrimSpace(stderr), Err: err}
	if strings.Contains(stderr, "module lookup disabled") || strings.Contains(stderr, "dial tcp") {
		var mods []string
		for _, m := range downloading.FindAllStringSubmatch(stderr, -1) {
			mods = append(mods, m[1]+"@"+m[2])
		}
		if len(mods) > 0 {
			be.Missing = strings.Join(mods, ", ")
			return be
		}
	}
	for _, re := range missingModule {
		if m := re.FindStringSubmatch(stderr); m != nil {
			be.Missing = strings.Trim(m[1], ":;")
			break
		}
	}
	return be
}
