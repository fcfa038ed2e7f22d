package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// TryLockFile takes an exclusive flock on path (created 0600 if missing)
// without waiting. held is false while another open file, in this process
// or another, holds it. Closing f releases the lock; a lock dies with its
// process. Owners remove their lock files when done, so a file unlinked
// between open and lock is opened again: the lock returned always guards
// the file now at path.
func TryLockFile(path string) (f *os.File, held bool, err error) {
	for range 3 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, false, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, false, nil
			}
			return nil, false, fmt.Errorf("lock %s: %w", filepath.Base(path), err)
		}
		fi, ferr := f.Stat()
		ni, nerr := os.Stat(path)
		if ferr == nil && nerr == nil && os.SameFile(fi, ni) {
			return f, true, nil
		}
		f.Close()
	}
	return nil, false, fmt.Errorf("lock %s: the file keeps being replaced", filepath.Base(path))
}
