package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kilnworks/kiln/capabilities/shell/internal/supervisor"
)

// A command runs under a supervisor (package supervisor): the kiln binary
// itself, executed again (/proc/self/exe). The supervisor leads a new
// process group and starts the command in it. Why a second process: a
// command's children outlive it unless someone kills its group, and if
// kiln is killed (SIGKILL, OOM) it can kill nothing. Pdeathsig alone only
// reaches the direct child (the kernel clears it on fork), so a script's
// `sleep` would be orphaned. The supervisor gets a catchable Pdeathsig
// (SIGTERM) from kiln and answers it by killing the whole group; the
// command gets Pdeathsig SIGKILL from the supervisor in case the
// supervisor itself is killed.
//
// Pdeathsig fires when the *thread* that forked the child exits, not the
// process. Go ends an OS thread only when a goroutine locked to it exits
// while still locked, so each side locks the forking goroutine to its
// thread from before the fork until the child is reaped (kiln) or for the
// rest of its life (supervisor): no other goroutine can run there, lock it
// and exit it.

// ended is how a command ended: it exited with code, or a signal killed it.
type ended struct {
	exited bool
	code   int
	signal syscall.Signal
}

// supervise runs the command exe (an O_PATH descriptor) with argv (argv[0]
// is the name the command sees) and env under a supervisor, and kills the
// supervisor's whole process group when ctx is done or the command ends.
func supervise(ctx context.Context, exe *os.File, argv, env []string, stdout, stderr io.Writer) (ended, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return ended{}, err
	}
	defer statusR.Close()
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        append([]string{supervisor.Name, strconv.Itoa(os.Getpid())}, argv...),
		Env:         env,
		Stdout:      stdout, // stdin stays nil: /dev/null
		Stderr:      stderr,
		ExtraFiles:  []*os.File{exe, statusW}, // supervisor.CommandFD, StatusFD
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM},
		// A process that left the group and holds the pipes must not hang
		// the node.
		WaitDelay: time.Second,
	}
	goruntime.LockOSThread() // see the top of this file
	defer goruntime.UnlockOSThread()
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		return ended{}, err
	}
	pid := cmd.Process.Pid // also the group id

	// Until Wait reaps the supervisor, its pid (the group id) cannot be
	// reused, so the group kills below cannot hit anyone else's group.
	exited, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			syscall.Kill(-pid, syscall.SIGKILL)
		case <-exited:
		}
	}()
	werr := waitExited(pid)
	close(exited)
	<-watched
	if werr == nil {
		// However the run ended, nothing of the group outlives it.
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	waitErr := cmd.Wait()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return ended{}, waitErr
	}

	report, _ := io.ReadAll(io.LimitReader(statusR, 512))
	kind, value, _ := strings.Cut(string(report), " ")
	n, _ := strconv.Atoi(value)
	switch kind {
	case "exit":
		return ended{exited: true, code: n}, nil
	case "signal":
		return ended{signal: syscall.Signal(n)}, nil
	case "error":
		return ended{}, errors.New(value)
	}
	// No report: the supervisor was killed (timeout, cancel) and the
	// command with it.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ended{signal: ws.Signal()}, nil
	}
	return ended{}, fmt.Errorf("supervisor ended without a report (%v)", cmd.ProcessState)
}

// waitExited blocks until the process pid has exited, without reaping it.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}
