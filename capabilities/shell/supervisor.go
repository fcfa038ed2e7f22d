package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A command runs under a supervisor: the kiln binary itself, executed
// again (/proc/self/exe) with argv[0] supervisorName. The supervisor leads
// a new process group and starts the command in it. Why a second process:
// a command's children outlive it unless someone kills its group, and if
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

// supervisorName is the argv[0] that turns a binary linking this package
// into a supervisor (see init).
const supervisorName = "kiln-shell-supervisor"

// The supervisor's descriptors besides stdio: the command to execute and
// the pipe on which it reports how the command ended.
const (
	commandFD = 3
	statusFD  = 4
)

func init() {
	if len(os.Args) > 2 && os.Args[0] == supervisorName {
		os.Exit(runSupervisor(os.Args[1], os.Args[2:]))
	}
}

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
		Args:        append([]string{supervisorName, strconv.Itoa(os.Getpid())}, argv...),
		Env:         env,
		Stdout:      stdout, // stdin stays nil: /dev/null
		Stderr:      stderr,
		ExtraFiles:  []*os.File{exe, statusW}, // commandFD, statusFD
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

// runSupervisor is the supervisor process: it runs argv from commandFD,
// reports how it ended on statusFD, and kills its group when the command
// ends or when its parent (pid parent) dies. It returns only on failure.
func runSupervisor(parent string, argv []string) int {
	// SIGTERM is the parent's death (Pdeathsig) or a kill aimed at the
	// group; getppid tells which. Every other signal is caught too, so
	// that a kill aimed at the group (`kill -INT 0` in a script) cannot
	// end the supervisor and with it the command. Exec resets caught
	// signals to their defaults: the command sees none of this.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ignored := make(chan os.Signal, 8)
	signal.Notify(ignored)
	go func() {
		for range ignored {
		}
	}()
	parentGone := func() bool { return strconv.Itoa(os.Getppid()) != parent }
	if parentGone() { // kiln died before the handler above was in place
		return 2
	}
	syscall.CloseOnExec(statusFD) // the command must not hold the report pipe
	status := os.NewFile(statusFD, "status")
	cmd := &exec.Cmd{
		Path:        "/proc/self/fd/" + strconv.Itoa(commandFD),
		Args:        argv,
		Env:         os.Environ(),
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{os.NewFile(commandFD, "command")}, // a script's interpreter opens it
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	goruntime.LockOSThread() // never unlocked: see the top of this file
	if err := cmd.Start(); err != nil {
		var pe *iofs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(status, "error %v", err)
		return 2
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	for {
		select {
		case <-term:
			if parentGone() {
				syscall.Kill(0, syscall.SIGKILL) // kiln is gone: so is the group
			}
		case <-done:
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				fmt.Fprintf(status, "signal %d", ws.Signal())
			} else {
				fmt.Fprintf(status, "exit %d", ws.ExitStatus())
			}
			syscall.Kill(0, syscall.SIGKILL) // the command's leftovers, and this process
			return 2
		}
	}
}
