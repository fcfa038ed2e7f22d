package fire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Slot holds at most one in-flight run of a trigger. Claim takes it, Go
// starts the run, and Drain waits for the run at shutdown. Every trigger
// that drops (rather than queues) a fire while a run is in flight shares
// it: the Gate of the schedule families and the MCP resource listener.
type Slot struct {
	busy atomic.Bool
	wg   sync.WaitGroup

	cancelMu sync.Mutex
	cancel   context.CancelFunc // of the in-flight run
}

// Claim takes the slot; false while a run is in flight.
func (s *Slot) Claim() bool { return s.busy.CompareAndSwap(false, true) }

// Busy reports whether a run is in flight.
func (s *Slot) Busy() bool { return s.busy.Load() }

// Go runs run in a goroutine for the claimed slot. run's context does not
// inherit ctx's cancellation (a shutdown drains the run, see Drain, rather
// than killing it at once). run calls free once the run's outcome is
// known, before auditing it, so that a fire following the end line is not
// dropped as "still in flight"; the slot is freed when run returns in any
// case.
func (s *Slot) Go(ctx context.Context, run func(ctx context.Context, free func())) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancelMu.Lock()
	s.cancel = cancel
	s.cancelMu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.busy.Store(false) // should run panic
		defer cancel()
		run(runCtx, func() { s.busy.Store(false) })
	}()
}

// Drain blocks until the in-flight run (if any) has finished. After
// timeout (when positive) it calls timedOut (to audit that), cancels the
// run and waits for it to stop.
func (s *Slot) Drain(timeout time.Duration, timedOut func()) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	if timeout <= 0 {
		<-done
		return
	}
	select {
	case <-done:
		return
	case <-time.After(timeout):
	}
	// Said before the cancellation, so the audit shows the cause before
	// the run's end.
	timedOut()
	s.cancelMu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.cancelMu.Unlock()
	<-done
}
