// Package cli is the command line shared by `kiln run` (after it loaded the
// TOML) and every sealed binary: one run with the outcome JSON on stdout,
// or serve mode, where every compiled-in capability's listeners (HTTP
// routes, cron, file watchers, ...) run until SIGTERM/SIGINT.
//
// Every flag NAME can also be given as the environment variable KILN_NAME
// (upper case, '-' as '_'; for example KILN_STATE_DIR, KILN_DRY_RUN=1,
// KILN_BIND); the command line wins. Logging settings fall back further to
// the workflow's [logging] block.
package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Exit codes, of sealed binaries, `kiln run` and every other kiln
// command alike: this block is their one owner.
const (
	ExitOK = 0 // completed; serve mode stopped cleanly
	// ExitTestFail is `kiln test`'s alone: a fixture failed. A run never
	// exits 1, so a script can tell the two apart.
	ExitTestFail = 1
	ExitUsage    = 2 // usage or configuration error, unreadable or unparsable input
	ExitFailed   = 5 // failed, timed out or errored; an invalid workflow, a failed verification
	// ExitBlocked: preflight refused a run or serve because a mandatory
	// need is unmet (and `BIN needs` reporting a blocked binary).
	ExitBlocked = 6
	ExitPaused  = 7 // paused for approval
	// ExitTampered: a sealed binary refuses to start because its tables,
	// needs, sources or manifest were altered after sealing.
	ExitTampered = 8
)

// Options describe the process calling Main.
type Options struct {
	Prog     string             // name in messages ("kiln", the binary's name)
	Workflow *workflow.Workflow // the validated workflow to run
	// Sealed marks a sealed binary: it runs only its own workflow, so
	// --config is refused.
	Sealed bool
	// Version is printed by --version and reported by discovery. When it
	// is empty, --version prints ModuleVersion, then "(devel)": kiln run
	// passes its build info's module version there, so the run CLI reads
	// no build info and sealed binaries do not link its parser.
	Version       string
	ModuleVersion string
	Stdin         io.Reader
	Stdout        io.Writer
	Stderr        io.Writer
	// Env looks up environment variables (nil = os.Getenv).
	Env func(string) string
	// Usage is the first line of -h ("" = "usage: PROG [flags] [once|serve]").
	Usage string
	// Build is the program's effective needs and linked families
	// (preflight.go); nil skips the preflight.
	Build *Build
	// Exits says the process ends when Main returns (a sealed binary's
	// main): SIGINT and SIGTERM then stay registered to the end instead
	// of being handed back to the runtime, which takes two more hand-offs
	// with its signal thread. A signal after the run ends is caught and
	// changes nothing.
	Exits bool
}

// settings are the parsed flags, after environment fallbacks. New flags
// (resume, checkpoints, ...) add a field here, a line in defineFlags and
// their handling in runOnce.
type settings struct {
	start       string
	input       string
	dryRun      bool
	record      string
	timeoutSecs int
	stateDir    string
	logLevel    string
	logFormat   string
	logTarget   string
	quiet       bool
	mode        string
	drainSecs   int
	config      string
	version     bool
	replay      []string       // `replay` and its arguments (replay.go); nil: not replaying
	tapes       *taping        // --record, --record-dir (record.go); nil: off
	durable     durableFlags   // --resume, --checkpoint-each-node, ... (durable.go)
	preflight   preflightFlags // --approvals, --preflight, `needs` (preflight.go)
	rec         recordFlags    // --record-dir and its bounds (record.go)
	command     *familyCommand // a family's subcommand, e.g. `state migrate` (commands.go)
}

func defineFlags(fs *flag.FlagSet, s *settings) {
	fs.StringVar(&s.start, "start", "", "start node `name` (default: the first [[start_nodes]] entry)")
	fs.StringVar(&s.input, "input", "", "trigger payload: a JSON `file`, or - for stdin")
	fs.BoolVar(&s.dryRun, "dry-run", false, "check policy but replace side effects with placeholders")
	fs.StringVar(&s.record, "record", "", "write the one-shot run's tape (outcome, trace, trigger, every outside interaction; docs/replay.md) to `file`")
	fs.IntVar(&s.timeoutSecs, "timeout-secs", 0, "run deadline in `seconds` (0: [budget].max_run_time_secs, else none)")
	fs.StringVar(&s.stateDir, "state-dir", "", "`directory` for checkpoints (needed by pause_for_approval)")
	fs.StringVar(&s.logLevel, "log-level", "", "audit log `level`: trace, debug, info, warn, error, off")
	fs.StringVar(&s.logFormat, "log-format", "", "audit log `format`: text or json")
	fs.StringVar(&s.logTarget, "log-target", "", "audit log `target`: stderr, stdout or file:PATH")
	fs.BoolVar(&s.quiet, "quiet", false, "disable the audit log")
	fs.StringVar(&s.mode, "mode", "", "`once` or serve (default: serve when the workflow has http routes or long-lived triggers)")
	fs.IntVar(&s.drainSecs, "drain-timeout-secs", 25, "serve mode: `seconds` to let in-flight runs finish after SIGTERM/SIGINT (25: inside Kubernetes' default 30 s grace)")
	fs.StringVar(&s.config, "config", "", "refused: the workflow is compiled in (sealed) or already named (kiln run)")
	fs.BoolVar(&s.version, "version", false, "print the version and exit")
	defineDurableFlags(fs, &s.durable)
	definePreflightFlags(fs, &s.preflight)
	defineRecordFlags(fs, &s.rec)
}

// noEnv lists flags without an environment fallback.
var noEnv = map[string]bool{"config": true, "version": true}

// EnvName is the environment variable standing in for a flag: KILN_, then
// the name in upper case with '-' as '_'. Flag names are ASCII; every
// start computes this for each flag, so it is one allocation.
func EnvName(flagName string) string {
	b := append(make([]byte, 0, len("KILN_")+len(flagName)), "KILN_"...)
	for i := range len(flagName) {
		switch c := flagName[i]; {
		case 'a' <= c && c <= 'z':
			b = append(b, c-'a'+'A')
		case c == '-':
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// Main runs the CLI and returns the process exit code.
func Main(args []string, o Options) int {
	if o.Prog == "" {
		o.Prog = "kiln"
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Env == nil {
		o.Env = os.Getenv
	}
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(o.Stderr, "%s: %s\n", o.Prog, runtime.Redact(fmt.Sprintf(format, args...)))
		return code
	}

	var s settings
	fs := flag.NewFlagSet(o.Prog, flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	fs.Usage = func() {
		u := o.Usage
		if u == "" {
			u = "usage: " + o.Prog + " [command] [flags]"
		}
		fmt.Fprintf(o.Stderr, "%s\n", u)
		if o.Sealed {
			writeCommands(o.Stderr)
		}
		fmt.Fprintf(o.Stderr, "\nEvery flag NAME can also be set as KILN_NAME (e.g. KILN_STATE_DIR); the command line wins.\n\nflags:\n")
		// --config exists only to refuse it with a clear message; it is
		// not offered in the help.
		shown := flag.NewFlagSet(o.Prog, flag.ContinueOnError)
		shown.SetOutput(o.Stderr)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name != "config" {
				shown.Var(f.Value, f.Name, f.Usage)
			}
		})
		shown.PrintDefaults()
	}
	defineFlags(fs, &s)
	exts := runtime.Extensions()
	for _, ext := range exts {
		if ext.Flags != nil {
			ext.Flags(fs)
		}
	}
	rest, ok, code := parseArgs(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(rest) == 0:
	case len(rest) == 1 && rest[0] == "version":
		s.version = true
	case len(rest) == 1 && rest[0] == "needs":
		s.preflight.report = true
	case rest[0] == "replay":
		s.replay = rest[1:] // replay.go, once the workflow is known
	case len(rest) == 1 && (rest[0] == "serve" || rest[0] == "once"):
		if s.mode == "" {
			s.mode = rest[0]
		}
	default:
		if s.command = findCommand(exts, rest); s.command == nil {
			return fail(ExitUsage, "unexpected argument %q (see -h)", rest[0])
		}
	}
	if err := applyEnv(fs, o.Env); err != nil {
		return fail(ExitUsage, "%v", err)
	}

	if s.version {
		fmt.Fprintln(o.Stdout, versionLine(o))
		return ExitOK
	}
	if s.config != "" {
		if o.Sealed {
			return fail(ExitUsage, "--config is not accepted: a sealed binary runs only its own embedded workflow")
		}
		return fail(ExitUsage, "--config given, but the workflow is already loaded")
	}
	if o.Workflow == nil {
		return fail(ExitUsage, "no workflow to run")
	}
	if s.replay != nil { // before any extension starts: a replay reaches nothing outside
		prog, err := runtime.Compile(o.Workflow, runtime.CompileOptions{Unprovided: o.Build.unprovided()})
		if err != nil {
			return fail(ExitUsage, "%v", err)
		}
		return Replay(context.Background(), o.Prog+" replay", prog, s.replay, o.Stdout, o.Stderr)
	}
	if s.timeoutSecs < 0 || s.drainSecs < 0 {
		return fail(ExitUsage, "--timeout-secs and --drain-timeout-secs must not be negative")
	}
	if err := s.preflight.check(); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	if err := s.durable.check(&s, o.Workflow); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	if err := s.rec.check(); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	serve, err := serveMode(s.mode, o.Workflow)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}

	audit, closeLog, err := runtime.NewAuditLogger(auditOptions(&s, o))
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	defer closeLog.Close()

	s.preflight.sandbox = sandboxRequest(&s, o, fs, serve) // sandbox.go
	if code, done := preflight(&s.preflight, o, audit); done {
		return code
	}
	prog, err := runtime.Compile(o.Workflow, runtime.CompileOptions{Unprovided: o.Build.unprovided()})
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	// Close hooks run once, in reverse order of Setup, after everything
	// stopped: when Main returns, or before [budget] max_cpu_secs ends the
	// process (so spans still queued are exported, child processes stop).
	closeExts := sync.OnceFunc(func() {
		for i := len(exts) - 1; i >= 0; i-- {
			if ext := exts[i]; ext.Close != nil {
				if err := ext.Close(); err != nil {
					audit.Warn("extension.close_failed", "extension", ext.Name, "error", err.Error())
				}
			}
		}
	})
	if err := applyBudget(o.Workflow.Budget, o.Stderr, o.Prog, audit, closeExts); err != nil { // limits.go
		return fail(ExitUsage, "%v", err)
	}
	engine := &runtime.Engine{
		Audit:    audit,
		StateDir: s.stateDir,
		Services: &runtime.Services{Secret: envSecret(o.Env)},
	}
	host := &runtime.Host{
		Engine: engine, Program: prog, DryRun: s.dryRun, ServeMode: serve,
		DrainTimeout: time.Duration(s.drainSecs) * time.Second,
		RunTimeout:   time.Duration(s.timeoutSecs) * time.Second, // serve-mode runs too
	}
	attachBuild(host, o)                             // preflight.go: for the discovery documents
	tapes := attachTapes(host, &s, func(err error) { // record.go
		fmt.Fprintf(o.Stderr, "%s: %s\n", o.Prog, runtime.Redact(err.Error()))
		audit.Warn("record.failed", "error", err.Error())
	})
	otelLinked := slices.ContainsFunc(exts, func(e runtime.Extension) bool { return e.Name == "otel" })
	if ignored := unsupportedLogging(o.Workflow.Logging, otelLinked); len(ignored) > 0 {
		detail := "this binary does not link the otel capability family, so nothing is exported over OpenTelemetry"
		audit.Warn("logging.unsupported", "workflow", o.Workflow.Name, "ignored", strings.Join(ignored, ", "), "detail", detail)
	}
	if prog.Policy.AllowAll() {
		audit.Warn("policy.allow_all", "workflow", o.Workflow.Name,
			"detail", "the workflow declares no [policy] block: every capability is allowed and the process is not confined (development only)")
	}

	// SIGINT and SIGTERM cancel ctx. Registering for them starts threads
	// (os/signal locks one), and confinement signals every thread of the
	// process, twice: when nothing before confinement can be interrupted
	// (no extension sets anything up, no family command runs), they are
	// registered just after it, before any node or listener starts.
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	notify := func() { ctx, stop = signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM) }
	early := s.command != nil || slices.ContainsFunc(exts, func(e runtime.Extension) bool { return e.Setup != nil })
	if early {
		notify()
	}
	defer func() {
		if !o.Exits {
			stop()
		}
	}()
	defer closeExts()
	if s.durable.list && !sharedState(o.Workflow) { // a shared store is listed after Setup (runDurable)
		return listCheckpoints(ctx, host, o, fail)
	}
	for _, ext := range exts {
		if ext.Setup == nil || s.command.replaces(ext) {
			continue
		}
		if err := ext.Setup(ctx, host); err != nil {
			return fail(ExitUsage, "%s: %v", ext.Name, err)
		}
	}
	// After Setup, which resolves the [[secrets]] registry: those short
	// secrets are reported now, by name; secrets resolved later (the
	// environment fallback) when they are first resolved.
	runtime.WarnShortSecrets(func(name string) { warnShortSecret(o, audit, name) })
	defer runtime.WarnShortSecrets(nil)
	if s.command != nil {
		return s.command.run(ctx, host, o, fail)
	}
	// Everything read outside the policy is read (configuration, TLS and
	// secret files, approvals): hand the rest to the kernel before the
	// first node runs.
	if code, done := confineProcess(s.preflight.sandbox, o, audit); done {
		return code
	}
	if !early {
		notify()
	}
	tapes.observe() // after Setup, which may have set the engine's observer
	s.tapes = tapes
	if code, ok := runDurable(ctx, host, &s, o, fail); ok {
		return code
	}
	if serve {
		if serveFn == nil {
			return fail(ExitUsage, nothingToServe)
		}
		return serveFn(ctx, stop, host, exts, o, fail)
	}
	return runOnce(ctx, host, &s, o, fail)
}

// subcommands are what a sealed binary accepts as its first argument
// (manifest and verify are answered by runtime/sealed before Main).
var subcommands = []struct{ name, summary string }{
	{"once", "run the workflow once: outcome JSON on stdout (the default without listeners)"},
	{"serve", "run every listener (HTTP routes, cron, watchers) until SIGTERM/SIGINT"},
	{"manifest", "print the embedded manifest"},
	{"verify", "check the compiled-in tables, needs, sources and manifest against the seal"},
	{"needs", "print the preflight report of the effective needs (exit 6 when blocked)"},
	{"version", "print the version"},
	{"replay", "replay tapes (--record, --record-dir) with every outside request answered from the tape"},
}

func writeCommands(w io.Writer) {
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	writeFamilyCommands(w) // commands.go
}

// parseArgs parses flags before and after a subcommand, as Go tools do
// (`BIN needs --approvals F` is `BIN --approvals F needs`), and returns
// the positional arguments. ok is false after -h (code ExitOK) or a bad
// flag (ExitUsage; the flag package printed why).
func parseArgs(fs *flag.FlagSet, args []string) (rest []string, ok bool, code int) {
	parse := func(a []string) bool {
		if err := fs.Parse(a); err != nil {
			code = ExitUsage
			if errors.Is(err, flag.ErrHelp) {
				code = ExitOK
			}
			return false
		}
		return true
	}
	if !parse(args) {
		return nil, false, code
	}
	for fs.NArg() > 0 {
		rest = append(rest, fs.Arg(0))
		if fs.Arg(0) == "replay" { // replay parses its own arguments
			return append(rest, fs.Args()[1:]...), true, ExitOK
		}
		if !parse(fs.Args()[1:]) {
			return nil, false, code
		}
	}
	return rest, true, ExitOK
}

// applyEnv fills every flag not given on the command line from KILN_NAME.
func applyEnv(fs *flag.FlagSet, env func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] || noEnv[f.Name] {
			return
		}
		name := EnvName(f.Name)
		if v := env(name); v != "" {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, serr)
			}
		}
	})
	return err
}

func auditOptions(s *settings, o Options) runtime.AuditOptions {
	a := runtime.AuditOptions{Level: s.logLevel, Format: s.logFormat, Target: s.logTarget,
		Disabled: s.quiet, Stdout: o.Stdout, Stderr: o.Stderr}
	if lg := o.Workflow.Logging; lg != nil {
		if a.Level == "" {
			a.Level = lg.Level
		}
		if a.Format == "" {
			a.Format = lg.Format
		}
		if a.Target == "" {
			a.Target = workflowLogTarget(lg.Target, o.Workflow.Source)
		}
		a.Rotation = lg.Rotation
		if lg.Enabled != nil && !*lg.Enabled {
			a.Disabled = true
		}
		if au := lg.Audit; au != nil {
			// --log-target overrides [logging] target only: the dedicated
			// audit sink stays.
			a.AuditTarget = workflowLogTarget(au.Target, o.Workflow.Source)
			a.RedactFields = au.RedactFields
			if au.IncludeReason != nil && !*au.IncludeReason {
				a.DropFields = []string{"reason"}
			}
		}
	}
	return a
}

// workflowLogTarget resolves a target written in the workflow: a relative
// file is relative to the workflow file (flags stay relative to the
// working directory).
func workflowLogTarget(target, source string) string {
	if p, ok := strings.CutPrefix(target, "file:"); ok && p != "" && !filepath.IsAbs(p) && source != "" {
		return "file:" + filepath.Join(filepath.Dir(source), p)
	}
	return target
}

// unsupportedLogging lists the [logging] settings kiln accepts (reference
// workflows declare them) but does not act on, so the operator is told
// instead of trusting them. [logging.otel] is acted on when the otel
// family is linked (otelLinked).
func unsupportedLogging(lg *workflow.Logging, otelLinked bool) []string {
	if lg == nil {
		return nil
	}
	if lg.OTel != nil && !otelLinked {
		return []string{"[logging.otel]"}
	}
	return nil
}

// serveMode decides between one run and serving: --mode wins; otherwise a
// workflow with http routes or long-lived triggers serves.
func serveMode(mode string, wf *workflow.Workflow) (bool, error) {
	switch mode {
	case "serve":
		return true, nil
	case "once":
		return false, nil
	case "":
		if len(wf.HTTPRoutes) > 0 {
			return true, nil
		}
		for _, t := range wf.Triggers {
			switch t.Type {
			case "cron", "interval", "fs_watch", "mcp.resource.updated", "mcp.resource.created":
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("--mode %q: want once or serve", mode)
}

// envSecret is the default secret lookup (the environment), replaced by
// the secrets family when it is compiled in. Every value it hands out is
// registered for redaction.
func envSecret(env func(string) string) func(string) (string, error) {
	return func(name string) (string, error) {
		v := env(name)
		if v == "" {
			return "", fmt.Errorf("secret %s is not set (no [[secrets]] registry: looked for the environment variable %s)", name, name)
		}
		runtime.RedactSecret(name, v)
		return v, nil
	}
}

// warnShortSecret tells the operator, on stderr and in the audit log, that
// a secret (by name, never its value) is short enough for its redaction
// to hide unrelated output.
func warnShortSecret(o Options, audit *slog.Logger, name string) {
	msg := runtime.ShortSecretWarning(name)
	fmt.Fprintf(o.Stderr, "%s: warning: %s\n", o.Prog, runtime.Redact(msg))
	if name == "" {
		audit.Warn("secret.short", "detail", msg)
		return
	}
	audit.Warn("secret.short", "secret", name, "detail", msg)
}

func versionLine(o Options) string {
	v := cmp.Or(o.Version, o.ModuleVersion, "(devel)")
	line := o.Prog + " " + v
	if o.Workflow != nil {
		line += " (workflow " + o.Workflow.Name + ")"
	}
	return line
}

// ExitCode maps a run status to the process exit code.
func ExitCode(status string) int {
	switch status {
	case runtime.StatusCompleted:
		return ExitOK
	case runtime.StatusPaused:
		return ExitPaused
	}
	return ExitFailed
}

// runOnce performs one manual run and prints its outcome.
func runOnce(ctx context.Context, h *runtime.Host, s *settings, o Options, fail func(int, string, ...any) int) int {
	if _, err := h.Program.Entry(s.start); err != nil {
		return fail(ExitUsage, "%v", err)
	}
	var payload any
	if s.input != "" {
		p, err := readInput(s.input, o.Stdin)
		if err != nil {
			return fail(ExitUsage, "--input: %v", err)
		}
		payload = p
	}
	rep := h.Fire(ctx, runtime.RunOptions{
		Start:              s.start,
		Trigger:            runtime.MakeTrigger("manual", payload),
		Timeout:            time.Duration(s.timeoutSecs) * time.Second,
		CheckpointEachNode: s.durable.eachNode,
	})
	return finish(rep, s, o, fail)
}

// finish prints a run's outcome, writes --record and returns the exit code.
func finish(rep *runtime.Report, s *settings, o Options, fail func(int, string, ...any) int) int {
	out, err := runtime.EncodeJSONIndent(rep.Outcome)
	if err != nil {
		return fail(ExitFailed, "encode outcome: %v", err)
	}
	fmt.Fprintf(o.Stdout, "%s\n", runtime.RedactJSON(out))
	if rep.Outcome.Status == runtime.StatusErrored {
		fmt.Fprintf(o.Stderr, "%s: %s\n", o.Prog, runtime.Redact(rep.Outcome.Reason))
	}
	if s.dryRun {
		explainDryRun(o.Stderr, rep) // explain.go
	}
	if s.record != "" && !s.tapes.wrote(rep) { // a resumed run: its record, not a tape
		data, err := rep.Record()
		if err == nil {
			err = runtime.WriteFileAtomic(s.record, append(runtime.RedactJSON(data), '\n'), 0o600)
		}
		if err != nil {
			return fail(ExitUsage, "--record: %v", err)
		}
	}
	return ExitCode(rep.Outcome.Status)
}

func readInput(name string, stdin io.Reader) (any, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, 64<<20))
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	v, err := runtime.DecodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	return v, nil
}

// servesWork: l starts runs (not the ops listener, which StopsLast).
func servesWork(l runtime.Listener) bool {
	_, last := l.(interface{ StopsLast() })
	return !last
}

// serveFn is serveLoop in a binary that can serve (EnableServe), else nil.
var serveFn func(ctx context.Context, stop context.CancelFunc, h *runtime.Host, exts []runtime.Extension,
	o Options, fail func(int, string, ...any) int) int

// EnableServe links the serve loop into the binary. The families whose
// listeners start runs call it from their package init (through
// capabilities/internal/ops, which each of them imports); a one-shot
// binary, which has nothing to serve, does not carry the loop.
func EnableServe() { serveFn = serveLoop }

const nothingToServe = "serve mode: nothing to serve (the workflow declares no http routes or triggers a compiled-in capability listens for)"

// serveLoop runs every extension's listeners until a signal (or the first
// listener failure), then cancels them and waits for them to drain.
func serveLoop(ctx context.Context, stop context.CancelFunc, h *runtime.Host, exts []runtime.Extension,
	o Options, fail func(int, string, ...any) int) int {
	var listeners []runtime.Listener
	for _, ext := range exts {
		if ext.Listeners == nil {
			continue
		}
		ls, err := ext.Listeners(h)
		if err != nil {
			return fail(ExitUsage, "%s: %v", ext.Name, err)
		}
		listeners = append(listeners, ls...)
	}
	if !slices.ContainsFunc(listeners, servesWork) { // the ops listener alone serves nothing
		return fail(ExitUsage, nothingToServe)
	}
	audit := h.Engine.Audit
	names := make([]string, len(listeners))
	for i, l := range listeners {
		names[i] = l.Name()
	}
	audit.Info("serve.started", "workflow", o.Workflow.Name, "listeners", strings.Join(names, ","))

	type result struct {
		name string
		err  error
		last bool
	}
	done := make(chan result, len(listeners))
	// The ops listener (and any other that StopsLast) keeps answering
	// /readyz with 503 while the others drain: lastCtx ends after them.
	lastCtx, stopLast := context.WithCancel(context.Background())
	defer stopLast()
	others := 0 // listeners running that stop on the signal
	for _, l := range listeners {
		lctx, isLast := ctx, false
		if _, ok := l.(interface{ StopsLast() }); ok {
			lctx, isLast = lastCtx, true
		} else {
			others++
		}
		go func(l runtime.Listener) { done <- result{l.Name(), l.Serve(lctx), isLast} }(l)
	}
	finished := func(r result) {
		if !r.last {
			others--
		}
		if others == 0 {
			stopLast()
		}
	}
	code, running := ExitOK, len(listeners)
	select {
	case <-ctx.Done():
	case r := <-done:
		running--
		finished(r)
		if r.err != nil {
			code = fail(ExitUsage, "listener %s: %v", r.name, r.err)
		} else {
			audit.Warn("serve.listener_stopped", "listener", r.name)
		}
	}
	// Not ready from here on, before any listener stops accepting.
	h.BlockReady("draining", "the process is stopping")
	stop() // cancel every listener; a second signal now kills the process
	if others == 0 {
		stopLast()
	}
	audit.Info("serve.draining", "listeners", running, "drain_timeout_secs", int(h.DrainTimeout/time.Second))
	// Listeners drain in-flight runs within DrainTimeout themselves; the
	// grace on top covers their own shutdown.
	deadline := time.After(h.DrainTimeout + 2*time.Second)
	for running > 0 {
		select {
		case r := <-done:
			running--
			if r.err != nil && !errors.Is(r.err, context.Canceled) {
				audit.Warn("serve.listener_error", "listener", r.name, "error", r.err.Error())
			}
			finished(r)
		case <-deadline:
			audit.Warn("serve.drain_timeout", "listeners_still_running", running)
			running = 0
		}
	}
	audit.Log(context.Background(), slog.LevelInfo, "serve.stopped", "exit_code", code)
	return code
}
