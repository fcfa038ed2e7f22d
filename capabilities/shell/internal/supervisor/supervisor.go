// Package supervisor is the process a shell_run command runs under: the
// binary that links it, executed again with argv[0] Name, leads a new
// process group, starts the command in it, reports how the command ended
// and kills the group when the command ends or when the process that
// started it (kiln) dies. See capabilities/shell for why.
//
// Every shell_run pays this process's start, so the package depends on
// nothing but os, os/signal, runtime, strconv and syscall: Go initializes
// packages in import-path order as their imports are ready, so this one,
// and its hook, run before the heavier packages of the binary are
// initialized at all (no os/exec: it waits for path/filepath, which comes
// after dozens of protobuf and telemetry packages).
package supervisor

import (
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

// Name is the argv[0] that turns a binary linking this package into a
// supervisor. The arguments after it are the parent's pid and the
// command's argv.
const Name = "kiln-shell-supervisor"

// The supervisor's descriptors besides stdio: the command to execute (an
// O_PATH descriptor) and the pipe on which it reports how the command
// ended ("exit N", "signal N" or "error MESSAGE").
const (
	CommandFD = 3
	StatusFD  = 4
)

func init() {
	if len(os.Args) > 2 && os.Args[0] == Name {
		os.Exit(run(os.Args[1], os.Args[2:]))
	}
}

// run is the supervisor: it runs argv from CommandFD, reports how it ended
// on StatusFD, and kills its group when the command ends or when its
// parent (pid parent) dies. It returns only on failure.
func run(parent string, argv []string) int {
	// SIGTERM is the parent's death (its Pdeathsig) or a kill aimed at
	// the group; getppid tells which. Every other signal is caught too, so
	// that a kill aimed at the group (`kill -INT 0` in a script) cannot end
	// the supervisor and with it the command. Exec resets caught signals
	// to their defaults: the command sees none of this.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ignored := make(chan os.Signal, 8)
	signal.Notify(ignored)
	go func() {
		for range ignored {
		}
	}()
	parentGone := func() bool { return strconv.Itoa(os.Getppid()) != parent }
	if parentGone() { // it died before the handler above was in place
		return 2
	}
	syscall.CloseOnExec(StatusFD) // the command must not hold the report pipe
	status := os.NewFile(StatusFD, "status")
	// Pdeathsig fires when the thread that forked exits: this goroutine
	// stays on its thread for good, so that thread lives as long as the
	// process (Go ends a thread only when a goroutine locked to it exits).
	runtime.LockOSThread()
	pid, err := syscall.ForkExec("/proc/self/fd/"+strconv.Itoa(CommandFD), argv, &syscall.ProcAttr{
		Env: os.Environ(),
		// stdio, and the command itself at CommandFD: a script's
		// interpreter opens it as /proc/self/fd/3.
		Files: []uintptr{0, 1, 2, CommandFD},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		status.WriteString("error " + err.Error())
		return 2
	}
	done := make(chan syscall.WaitStatus)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
		done <- ws
	}()
	for {
		select {
		case <-term:
			if parentGone() {
				syscall.Kill(0, syscall.SIGKILL) // kiln is gone: so is the group
			}
		case ws := <-done:
			if ws.Signaled() {
				status.WriteString("signal " + strconv.Itoa(int(ws.Signal())))
			} else {
				status.WriteString("exit " + strconv.Itoa(ws.ExitStatus()))
			}
			syscall.Kill(0, syscall.SIGKILL) // the command's leftovers, and this process
			return 2
		}
	}
}
