// Package shell is the shell family: the shell_run node spawns one local
// binary with argv-style arguments. There is no shell and no PATH lookup:
// the command is an absolute literal, resolved through symlinks before the
// policy check (so a link cannot smuggle in an unlisted binary), run with
// an environment cleared to a fixed PATH and LANG, stdin closed, stdout and
// stderr capped at 64 KiB each, and killed with its whole process group by
// SIGKILL at timeout_secs (default 30) or the run deadline.
package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	// OutputCap bounds stdout and stderr each.
	OutputCap = 64 << 10
	// DefaultTimeout applies when timeout_secs is unset.
	DefaultTimeout = 30 * time.Second
)

// Env is the whole environment of a spawned command.
var Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}

func init() {
	runtime.RegisterNode(runtime.NodeKind{Kind: "shell_run", Family: "shell", Prepare: prepare, SideEffect: true})
}

func prepare(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if n.Command == "" {
		return nil, fmt.Errorf("command is required")
	}
	if !filepath.IsAbs(n.Command) {
		return nil, fmt.Errorf("command %q must be an absolute path (there is no PATH lookup)", n.Command)
	}
	if strings.ContainsRune(n.Command, 0) {
		return nil, fmt.Errorf("command contains NUL")
	}
	timeout := DefaultTimeout
	if n.TimeoutSecs != nil {
		if *n.TimeoutSecs < 1 {
			return nil, fmt.Errorf("timeout_secs must be >= 1, got %d", *n.TimeoutSecs)
		}
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
		resolved, err = c.Run.Policy().ShellResolve(resolved)
		if err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"command": c.Node.Command, "args": args, "dry_run": true}), nil
		}
		return spawn(ctx, c, resolved, args, timeout)
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

func spawn(ctx context.Context, c *runtime.Call, resolved string, args []string, timeout time.Duration) (runtime.Result, error) {
	nodeCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(nodeCtx, resolved, args...)
	cmd.Args[0] = c.Node.Command
	cmd.Env = Env
	cmd.Stdin = nil // /dev/null: stdin is closed to the child
	stdout, stderr := &capped{}, &capped{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Own process group, so the kill reaches grandchildren too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the pipes open must not hang the node.
	cmd.WaitDelay = time.Second

	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	timedOut := nodeCtx.Err() != nil
	if timedOut {
		// Whatever the child did, make sure its group is gone.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}

	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		return runtime.Result{}, c.Errorf(runtime.ClassTool, "start %s: %v", c.Node.Command, err)
	}
	if timedOut && ctx.Err() != nil {
		// The run deadline, not the node's own timeout: the run is over.
		return runtime.Result{}, c.Errorf(runtime.ClassTimeout, "run deadline reached while %s ran; killed", c.Node.Command)
	}

	var exitCode, signal any // null unless known
	failed := true
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
		switch {
		case st.Signaled():
			signal = signalName(st.Signal())
		case st.Exited():
			exitCode = st.ExitStatus()
			failed = st.ExitStatus() != 0
		}
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
