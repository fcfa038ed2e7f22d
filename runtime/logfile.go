package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Log rotation ([logging] rotation) follows the reference's appender
// (tracing-appender): the file being written carries its period in its
// name, PATH.YYYY-MM-DD (daily), PATH.YYYY-MM-DD-HH (hourly) or
// PATH.YYYY-MM-DD-HH-MM (minutely), in UTC; never writes PATH itself.

// rotationPeriod returns the length of a rotation period and the time
// layout of its file-name suffix; zero for never.
func rotationPeriod(rotation string) (time.Duration, string, error) {
	switch rotation {
	case "", "never":
		return 0, "", nil
	case "minutely":
		return time.Minute, "2006-01-02-15-04", nil
	case "hourly":
		return time.Hour, "2006-01-02-15", nil
	case "daily":
		return 24 * time.Hour, "2006-01-02", nil
	}
	return 0, "", fmt.Errorf("log rotation %q: want never, minutely, hourly or daily", rotation)
}

// openLogFile opens a log file for appending (several invocations may
// share one), creating it owner-only and its parent directories.
func openLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
}

// rotatingFile writes whole lines (one Write each, as slog handlers do)
// to the file of the current period, switching files between lines. It is
// safe for concurrent use.
type rotatingFile struct {
	path   string
	period time.Duration
	layout string
	now    func() time.Time

	mu          sync.Mutex
	f           *os.File
	start, next time.Time // the open file's period is [start, next)
}

func openRotatingFile(path string, period time.Duration, layout string, now func() time.Time) (*rotatingFile, error) {
	if now == nil {
		now = time.Now
	}
	r := &rotatingFile{path: path, period: period, layout: layout, now: now}
	if err := r.open(now()); err != nil {
		return nil, err
	}
	return r, nil
}

// open switches to the file of t's period. UTC periods are whole multiples
// of the period since Go's zero time, so Truncate finds their start.
func (r *rotatingFile) open(t time.Time) error {
	start := t.UTC().Truncate(r.period)
	f, err := openLogFile(r.path + "." + start.Format(r.layout))
	if err != nil {
		return err
	}
	if r.f != nil {
		r.f.Close()
	}
	r.f, r.start, r.next = f, start, start.Add(r.period)
	return nil
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A clock set back also changes the period.
	if t := r.now(); t.Before(r.start) || !t.Before(r.next) {
		// When the new file cannot be opened the line still goes to the
		// old one rather than being lost; the next line tries again.
		_ = r.open(t)
	}
	return r.f.Write(p)
}

func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
