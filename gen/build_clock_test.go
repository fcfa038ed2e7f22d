package gen

import (
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestElapsedClock: while go build runs on a terminal, one line counting
// seconds is redrawn in place; stop erases it and nothing is written after.
func TestElapsedClock(t *testing.T) {
	var buf syncBuffer
	stop := elapsedClock(&buf, "kiln: go build running")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(buf.String(), "\rkiln: go build running 1s ") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	out := buf.String()
	if !strings.Contains(out, "\rkiln: go build running 1s ") || !strings.HasSuffix(out, "\r\033[K") {
		t.Fatalf("clock output %q", out)
	}
	time.Sleep(1100 * time.Millisecond)
	if buf.String() != out {
		t.Errorf("the clock wrote after stop: %q", buf.String()[len(out):])
	}
}
