// Package beneathtest helps tests race a check against its use.
package beneathtest

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Swap exchanges the names a and b (RENAME_EXCHANGE, atomic) over and over
// until the returned stop is called (or the test ends), and stop reports
// how many swaps it made.
func Swap(t *testing.T, a, b string) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	n := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); wg.Wait() })
		return n
	}
	t.Cleanup(func() { stop() })
	return stop
}
