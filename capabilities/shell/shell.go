// Package shell is the shell family: the shell_run node spawns one local
// binary with argv-style arguments. There is no shell and no PATH lookup:
// the command is an absolute literal, resolved through symlinks before the
// policy check (so a link cannot smuggle in an unlisted binary), then
// opened beneath its allowlist root and confirmed, and the descriptor is
// what runs (exec of /proc/self/fd/N), so the file checked is the file
// executed. It runs with an environment cleared to a fixed PATH and LANG
// plus KILN_IDEMPOTENCY_KEY, stdin closed, stdout and stderr capped at
// 64 KiB each, under a supervisor (supervisor.go) in its own process
// group: the whole group is killed by SIGKILL when the command ends, at
// timeout_secs (default 30), at the run deadline or cancel, and when the
// kiln process itself dies, even by SIGKILL.
package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnworks/kiln/capabilities/internal/beneath"
	shellspec "github.com/kilnworks/kiln/capabilities/shell/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	// OutputCap bounds stdout and stderr each.
	OutputCap = 64 << 10
	// DefaultTimeout applies when timeout_secs is unset.
	DefaultTimeout = 30 * time.Second
)

// Env is the environment of a spawned command; KILN_IDEMPOTENCY_KEY (see
// runtime.Call.IdempotencyKey) is added to it.
var Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}

// KindShellRun is the node kind of this family. No build registers it from
// init: a generated program registers it when its workflow uses it, and
// RegisterKinds registers it for binaries that link the whole family.
var KindShellRun = runtime.NodeKind{Kind: "shell_run", Family: "shell", Prepare: prepare, SideEffect: true}

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindShellRun)
}

func prepare(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(shellspec.CheckShellRun(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	if strings.ContainsRune(n.Command, 0) {
		return nil, fmt.Errorf("command contains NUL")
	}
	timeout := DefaultTimeout
	if n.TimeoutSecs != nil {
		timeout = time.Duration(*n.TimeoutSecs) * time.Second
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		args, err := argsOf(c)
		if err != nil {
			return runtime.Result{}, err
		}
		resolved, err := filepath.EvalSymlinks(c.Node.Command)
		if err != nil {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "command %s cannot be resolved: %v", c.Node.Command, errors.Unwrap(err))
		}
		pol := c.Run.Policy()
		resolved, root, err := pol.ShellTarget(resolved, args...)
		if err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"command": c.Node.Command, "args": args, "dry_run": true}), nil
		}
		// Through the run's recording/replay seam: a replay answers from
		// its tape and spawns nothing.
		req := map[string]any{"command": c.Node.Command, "args": args}
		return runtime.Interact(ctx, c, "shell.run", req, func() (runtime.Result, error) {
			c.AuditEffect("shell.run", resolved)
			exe, err := openCommand(pol, resolved, root, args)
			if err != nil {
				if policy.IsDenial(err) {
					return runtime.Result{}, err
				}
				return runtime.Result{}, c.Errorf(runtime.ClassTool, "command %s: %v", c.Node.Command, err)
			}
			defer exe.Close()
			return spawn(ctx, c, exe, args, timeout)
		})
	}, nil
}

// argsOf resolves args_from: absent is no arguments; anything but an array
// of strings is an error naming the node.
func argsOf(c *runtime.Call) ([]string, error) {
	if c.Node.ArgsFrom == "" {
		return []string{}, nil
	}
	v, found := c.Lookup(c.Node.ArgsFrom)
	if !found || v == nil {
		return []string{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, c.Errorf(runtime.ClassTool, "args_from %q must resolve to an array of strings", c.Node.ArgsFrom)
	}
	args := make([]string, len(list))
	for i, a := range list {
		s, ok := a.(string)
		if !ok {
			return nil, c.Errorf(runtime.ClassTool, "args_from %q: element %d is not a string", c.Node.ArgsFrom, i)
		}
		if strings.ContainsRune(s, 0) {
			return nil, c.Errorf(runtime.ClassTool, "args_from %q: element %d contains NUL", c.Node.ArgsFrom, i)
		}
		args[i] = s
	}
	return args, nil
}

// openCommand opens the command resolved beneath its allowlist root with
// O_PATH (nothing is read, nothing runs) and confirms the object it opened
// with the policy. The descriptor is what gets executed: a path swapped
// for a symlink after the check cannot change the file that runs. (An
// fstat comparison with the checked inode would not do: exec by name
// resolves the path again after the comparison.)
func openCommand(pol *policy.Policy, resolved, root string, args []string) (*os.File, error) {
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rootfd)
	rel, err := beneath.Rel(root, resolved)
	fd := -1
	if err == nil {
		fd, err = beneath.Open(rootfd, rel, unix.O_PATH)
	}
	if errors.Is(err, beneath.ErrOutside) {
		return nil, &policy.Denial{What: "shell.run", Target: resolved, Reason: "a symlink or '..' on the way leads outside the allowlist root"}
	}
	if err != nil {
		return nil, err
	}
	exe := os.NewFile(uintptr(fd), resolved)
	real, err := beneath.Path(fd)
	if err == nil {
		err = pol.ShellConfirm(real, args...)
	}
	var st unix.Stat_t
	if err == nil {
		err = unix.Fstat(fd, &st)
	}
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = errors.New("not a regular file")
	}
	if err != nil {
		exe.Close()
		return nil, err
	}
	return exe, nil
}

func spawn(ctx context.Context, c *runtime.Call, exe *os.File, args []string, timeout time.Duration) (runtime.Result, error) {
	nodeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stdout, stderr := &capped{}, &capped{}
	start := time.Now()
	res, err := supervise(nodeCtx, exe, append([]string{c.Node.Command}, args...),
		append(slices.Clone(Env), "KILN_IDEMPOTENCY_KEY="+c.IdempotencyKey()), stdout, stderr)
	elapsed := time.Since(start)
	if err != nil {
		return runtime.Result{}, c.Errorf(runtime.ClassTool, "start %s: %v", c.Node.Command, err)
	}
	timedOut := nodeCtx.Err() != nil
	if timedOut && ctx.Err() != nil {
		// The run deadline, not the node's own timeout: the run is over.
		return runtime.Result{}, c.Errorf(runtime.ClassTimeout, "run deadline reached while %s ran; killed", c.Node.Command)
	}

	var exitCode, signal any // null unless known
	failed := true
	switch {
	case res.signal != 0:
		signal = signalName(res.signal)
	case res.exited:
		exitCode = res.code
		failed = res.code != 0
	}
	out := map[string]any{
		"command":     c.Node.Command,
		"args":        args,
		"exit_code":   exitCode,
		"signal":      signal,
		"stdout":      stdout.String(),
		"stderr":      stderr.String(),
		"truncated":   stdout.over || stderr.over,
		"timed_out":   timedOut,
		"duration_ms": elapsed.Milliseconds(),
	}
	if failed {
		return runtime.NextBranch(out, "error"), nil
	}
	return runtime.Next(out), nil
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGXCPU:
		return "SIGXCPU"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// capped keeps the first OutputCap bytes and notes that more was written.
type capped struct {
	buf  bytes.Buffer
	over bool
}

func (w *capped) Write(p []byte) (int, error) {
	room := OutputCap - w.buf.Len()
	if len(p) > room {
		w.over = true
		w.buf.Write(p[:max(room, 0)])
		return len(p), nil // keep draining so the child never blocks
	}
	return w.buf.Write(p)
}

// String returns the kept bytes as valid UTF-8 (a cut may split a rune).
func (w *capped) String() string { return strings.ToValidUTF8(w.buf.String(), "\uFFFD") }
