package fire

import (
	"container/heap"
	"time"
)

// Debouncer coalesces bursts of events per key, for the trigger families
// that start a run per settled change (fs_watch per path, the MCP resource
// triggers per URI). A key's burst settles once no event has come for
// Quiet, or, when MaxDelay is positive, once MaxDelay has passed since its
// first event, so a source that never pauses still settles.
//
// One goroutine (the listener's loop) owns a Debouncer: it calls Note for
// each event and Settled whenever C delivers. There are no goroutines or
// timers per event: one timer per Debouncer, armed for the earliest
// pending deadline.
type Debouncer[K comparable, V any] struct {
	quiet, maxDelay time.Duration
	clock           Clock

	pending map[K]*pendingBurst[V]
	due     checks[K] // one entry per pending key: when to look at it next
	seq     uint64    // orders checks due at the same time

	c       <-chan time.Time
	armedAt time.Time
	stopped bool
}

// Burst is one settled burst: its key and the value its events folded to.
type Burst[K comparable, V any] struct {
	Key   K
	Value V
}

type pendingBurst[V any] struct {
	first, last time.Time
	value       V
}

// NewDebouncer returns a debouncer with the given quiet time and maximum
// delay (<= 0: none) on clock (nil: the wall clock).
func NewDebouncer[K comparable, V any](quiet, maxDelay time.Duration, clock Clock) *Debouncer[K, V] {
	if clock == nil {
		clock = RealClock{}
	}
	return &Debouncer[K, V]{quiet: quiet, maxDelay: maxDelay, clock: clock, pending: map[K]*pendingBurst[V]{}}
}

// Note adds one event to key's burst, starting a burst if none is pending.
// fold (nil: none) folds the event into the burst's value, which starts as
// V's zero value.
func (d *Debouncer[K, V]) Note(key K, fold func(V) V) {
	if d.stopped {
		return
	}
	now := d.clock.Now()
	b := d.pending[key]
	if b == nil {
		b = &pendingBurst[V]{first: now}
		d.pending[key] = b
		d.push(now.Add(d.quiet), key)
	}
	b.last = now
	if fold != nil {
		b.value = fold(b.value)
	}
	d.arm(now)
}

// C delivers when a burst may have settled; then call Settled. It is nil
// (never delivers) while nothing is pending.
func (d *Debouncer[K, V]) C() <-chan time.Time { return d.c }

// Settled removes and returns the bursts settled by now, earliest first.
func (d *Debouncer[K, V]) Settled() []Burst[K, V] {
	if d.stopped {
		return nil
	}
	now := d.clock.Now()
	var out []Burst[K, V]
	for len(d.due) > 0 && !d.due[0].at.After(now) {
		c := heap.Pop(&d.due).(check[K])
		b := d.pending[c.key]
		if at := d.deadline(b); at.After(now) {
			d.push(at, c.key) // a later event moved it
			continue
		}
		delete(d.pending, c.key)
		out = append(out, Burst[K, V]{Key: c.key, Value: b.value})
	}
	d.c = nil // consumed (or never fired): arm anew
	d.arm(now)
	return out
}

// Pending is the number of bursts not yet settled.
func (d *Debouncer[K, V]) Pending() int { return len(d.pending) }

// Stop drops every pending burst; none settles afterwards, and later
// events are ignored.
func (d *Debouncer[K, V]) Stop() {
	d.stopped = true
	d.pending, d.due, d.c = nil, nil, nil
}

// deadline is when b settles: Quiet after its last event, at the latest
// MaxDelay after its first.
func (d *Debouncer[K, V]) deadline(b *pendingBurst[V]) time.Time {
	at := b.last.Add(d.quiet)
	if d.maxDelay > 0 {
		if limit := b.first.Add(d.maxDelay); limit.Before(at) {
			at = limit
		}
	}
	return at
}

func (d *Debouncer[K, V]) push(at time.Time, key K) {
	d.seq++
	heap.Push(&d.due, check[K]{at: at, seq: d.seq, key: key})
}

// arm points C at the earliest check, unless it already is.
func (d *Debouncer[K, V]) arm(now time.Time) {
	if len(d.due) == 0 {
		d.c = nil
		return
	}
	at := d.due[0].at
	if d.c != nil && at.Equal(d.armedAt) {
		return
	}
	d.c, d.armedAt = d.clock.After(at.Sub(now)), at
}

// check is a pending key's next look, in a min-heap by time.
type check[K comparable] struct {
	at  time.Time
	seq uint64
	key K
}

type checks[K comparable] []check[K]

func (h checks[K]) Len() int { return len(h) }
func (h checks[K]) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h checks[K]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *checks[K]) Push(x any)   { *h = append(*h, x.(check[K])) }
func (h *checks[K]) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
