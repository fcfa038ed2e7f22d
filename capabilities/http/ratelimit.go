package http

import (
	"math"
	"sync"
	"time"
)

// bucket is a token bucket: capacity tokens of burst, refilled at rate
// tokens per second. One per route.
type bucket struct {
	capacity float64
	rate     float64
	now      func() time.Time

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newBucket(capacity int, perSecond float64, now func() time.Time) *bucket {
	return &bucket{capacity: float64(capacity), rate: perSecond, now: now,
		tokens: float64(capacity), last: now()}
}

// take consumes one token. When none is left it returns false and how
// long until one will be.
func (b *bucket) take() (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(b.capacity, b.tokens+elapsed*b.rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
	return false, wait
}
