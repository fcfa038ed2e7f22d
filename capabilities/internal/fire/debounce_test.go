package fire_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
)

const quiet = 100 * time.Millisecond

func count(n int) int { return n + 1 }

// settled is what the listener loop would see now: the settled bursts if
// C has delivered, else none.
func settled(d *fire.Debouncer[string, int]) []fire.Burst[string, int] {
	select {
	case <-d.C():
		return d.Settled()
	default:
		return nil
	}
}

func newDebouncer(maxDelay time.Duration) (*fire.Debouncer[string, int], *fire.FakeClock) {
	clock := fire.NewFakeClock(time.Unix(0, 0))
	return fire.NewDebouncer[string, int](quiet, maxDelay, clock), clock
}

func TestDebouncerCoalescesBurst(t *testing.T) {
	d, clock := newDebouncer(0)
	if d.C() != nil {
		t.Fatal("C is armed with nothing pending")
	}
	// Five events 60ms apart: the burst lasts 240ms, longer than the
	// quiet time, but never pauses for it.
	for i := range 5 {
		if i > 0 {
			clock.Advance(60 * time.Millisecond)
		}
		d.Note("a", count)
		if got := settled(d); got != nil {
			t.Fatalf("event %d: settled %v mid-burst", i, got)
		}
	}
	clock.Advance(quiet - time.Millisecond)
	if got := settled(d); got != nil {
		t.Fatalf("settled %v before the quiet time passed", got)
	}
	clock.Advance(time.Millisecond)
	if got, want := settled(d), []fire.Burst[string, int]{{Key: "a", Value: 5}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("settled %v, want %v", got, want)
	}
	if d.Pending() != 0 || d.C() != nil {
		t.Fatalf("after settling: %d pending, C armed %v", d.Pending(), d.C() != nil)
	}
	// The next event starts a new burst.
	d.Note("a", count)
	clock.Advance(quiet)
	if got, want := settled(d), []fire.Burst[string, int]{{Key: "a", Value: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("second burst settled %v, want %v", got, want)
	}
}

func TestDebouncerMaxDelay(t *testing.T) {
	// Events every 50ms never leave the quiet time: with a maximum delay
	// of 300ms the burst settles 300ms after its first event anyway.
	d, clock := newDebouncer(300 * time.Millisecond)
	var got []fire.Burst[string, int]
	elapsed := time.Duration(0)
	for ; got == nil && elapsed <= time.Second; elapsed += 50 * time.Millisecond {
		if elapsed > 0 {
			clock.Advance(50 * time.Millisecond)
		}
		if got = settled(d); got == nil {
			d.Note("a", count)
		}
	}
	if want := []fire.Burst[string, int]{{Key: "a", Value: 6}}; !reflect.DeepEqual(got, want) || elapsed-50*time.Millisecond != 300*time.Millisecond {
		t.Fatalf("settled %v after %v, want %v after 300ms", got, elapsed-50*time.Millisecond, want)
	}

	// Without a maximum delay the same stream never settles.
	d, clock = newDebouncer(0)
	for range 20 {
		d.Note("a", count)
		clock.Advance(50 * time.Millisecond)
		if got := settled(d); got != nil {
			t.Fatalf("settled %v without a pause or a maximum delay", got)
		}
	}
}

func TestDebouncerKeysAreIndependent(t *testing.T) {
	d, clock := newDebouncer(0)
	d.Note("a", count)
	clock.Advance(60 * time.Millisecond)
	d.Note("b", count) // must not hold a back
	clock.Advance(40 * time.Millisecond)
	if got, want := settled(d), []fire.Burst[string, int]{{Key: "a", Value: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("at 100ms settled %v, want %v", got, want)
	}
	d.Note("b", count) // must not revive a
	clock.Advance(quiet)
	if got, want := settled(d), []fire.Burst[string, int]{{Key: "b", Value: 2}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("at 200ms settled %v, want %v", got, want)
	}

	// Bursts that settle at the same time come out in the order they began.
	for _, k := range []string{"z", "y", "x"} {
		d.Note(k, nil)
	}
	clock.Advance(quiet)
	var keys []string
	for _, b := range settled(d) {
		keys = append(keys, b.Key)
	}
	if want := []string{"z", "y", "x"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("settled %v, want %v", keys, want)
	}
}

func TestDebouncerStop(t *testing.T) {
	d, clock := newDebouncer(time.Second)
	d.Note("a", count)
	d.Note("b", count)
	d.Stop()
	if d.C() != nil || d.Pending() != 0 {
		t.Fatalf("after Stop: C armed %v, %d pending", d.C() != nil, d.Pending())
	}
	d.Note("c", count)
	clock.Advance(2 * time.Second)
	if got := d.Settled(); got != nil || d.Pending() != 0 || d.C() != nil {
		t.Fatalf("a stopped debouncer settled %v (%d pending)", got, d.Pending())
	}
}

// TestDebouncerZeroQuiet: debounce_ms = 0 settles each event at once.
func TestDebouncerZeroQuiet(t *testing.T) {
	d := fire.NewDebouncer[string, int](0, 0, fire.NewFakeClock(time.Unix(0, 0)))
	d.Note("a", count)
	if got, want := settled(d), []fire.Burst[string, int]{{Key: "a", Value: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("settled %v, want %v", got, want)
	}
}

// TestDebouncerWallClock: with the real clock (nil), C delivers on its own.
func TestDebouncerWallClock(t *testing.T) {
	d := fire.NewDebouncer[string, int](time.Millisecond, 0, nil)
	d.Note("a", count)
	select {
	case <-d.C():
	case <-time.After(10 * time.Second): // generous: only a hang fails
		t.Fatal("C never delivered")
	}
	var got []fire.Burst[string, int]
	for got == nil {
		got = d.Settled()
		if got == nil {
			<-d.C() // fired a hair early for Now: wait for the re-armed check
		}
	}
	if want := []fire.Burst[string, int]{{Key: "a", Value: 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("settled %v, want %v", got, want)
	}
}

// TestDebouncerFloodArmsOneTimer: a flood of events holds one pending
// burst per key and one timer in all, not a timer (and goroutine) per
// event.
func TestDebouncerFloodArmsOneTimer(t *testing.T) {
	d, clock := newDebouncer(time.Second)
	for i := range 10000 {
		d.Note("a", count)
		d.Note(string(rune('b'+i%3)), count)
	}
	if n := len(clock.Waiting); n != 1 {
		t.Fatalf("%d timers armed for a flood on 4 keys, want 1", n)
	}
	if d.Pending() != 4 {
		t.Fatalf("%d pending bursts, want 4", d.Pending())
	}
	clock.Advance(quiet)
	if got := settled(d); len(got) != 4 || got[0] != (fire.Burst[string, int]{Key: "a", Value: 10000}) {
		t.Fatalf("settled %v", got)
	}
}
