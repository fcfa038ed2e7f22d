package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// closeGrace bounds the Close hooks run when max_cpu_secs is exhausted.
const closeGrace = 2 * time.Second

// applyBudget applies [budget] max_memory_mb and max_cpu_secs to the whole
// process (and, inherited, to the commands it spawns) at start-up. Limits
// are only ever lowered.
//
// Memory is capped with RLIMIT_DATA, not RLIMIT_AS: a Go process reserves
// about 1.2 GB of address space at start (measured: VmSize 1.2 GB, VmData
// 40 MB), so an address-space cap of max_memory_mb would fail the first
// allocation, while RLIMIT_DATA counts what is actually allocated (heap,
// stacks, anonymous mappings). The Go heap also gets a soft limit of 90 %
// of it, so the collector works harder before the hard cap is reached;
// reaching the cap ends the process ("fatal error: runtime: out of memory";
// Go 1.26's collector can instead fault on a failed mmap of its own
// metadata, which ends the process all the same).
//
// CPU: the soft RLIMIT_CPU is max_cpu_secs; the SIGXCPU it raises is
// reported, the extensions' Close hooks run (bounded by closeGrace) and
// the process exits 5 (the hard limit, one second later, is a SIGKILL
// backstop).
func applyBudget(b *workflow.Budget, stderr io.Writer, prog string, audit *slog.Logger, beforeExit func()) error {
	if b == nil {
		return nil
	}
	if b.MaxMemoryMB < 0 || b.MaxCPUSecs < 0 {
		return fmt.Errorf("[budget]: max_memory_mb and max_cpu_secs must not be negative")
	}
	if b.MaxMemoryMB > 0 {
		limit := uint64(b.MaxMemoryMB) << 20
		// The soft limit follows the cap actually in force, which may be
		// lower than the budget when the parent set one.
		inForce, err := lower(syscall.RLIMIT_DATA, limit, limit)
		if err != nil {
			return fmt.Errorf("[budget] max_memory_mb: %v", err)
		}
		debug.SetMemoryLimit(int64(inForce) / 10 * 9)
		audit.Info("budget.memory_limit", "max_memory_mb", b.MaxMemoryMB)
	}
	if b.MaxCPUSecs > 0 {
		xcpu := make(chan os.Signal, 1)
		signal.Notify(xcpu, syscall.SIGXCPU)
		go func() {
			<-xcpu
			audit.Error("budget.cpu_exceeded", "max_cpu_secs", b.MaxCPUSecs)
			fmt.Fprintf(stderr, "%s: [budget] max_cpu_secs (%d) exhausted; stopping\n", prog, b.MaxCPUSecs)
			// The extensions' Close hooks get a short, bounded chance (the
			// kernel kills the process one CPU second later anyway).
			closed := make(chan struct{})
			go func() { beforeExit(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(closeGrace):
			}
			os.Exit(ExitFailed)
		}()
		secs := uint64(b.MaxCPUSecs)
		if _, err := lower(syscall.RLIMIT_CPU, secs, secs+1); err != nil {
			return fmt.Errorf("[budget] max_cpu_secs: %v", err)
		}
		audit.Info("budget.cpu_limit", "max_cpu_secs", b.MaxCPUSecs)
	}
	return nil
}

// lower sets resource to (cur, max) unless the current limits are lower,
// and returns the soft limit then in force.
func lower(resource int, cur, max uint64) (uint64, error) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(resource, &old); err != nil {
		return 0, err
	}
	lim := syscall.Rlimit{Cur: min(cur, old.Cur), Max: min(max, old.Max)}
	lim.Cur = min(lim.Cur, lim.Max)
	return lim.Cur, syscall.Setrlimit(resource, &lim)
}
