package runtime

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// heldFor bounds how long a run's workflow.started line may wait for the
// run's next line before it is written on its own.
const heldFor = 100 * time.Millisecond

// lineSink is the audit logger's last handler. It formats each record
// with slog's text or JSON handler into a buffer of its own (so the bytes
// are exactly slog's; in a serving binary a run's own events take
// appendTextLine's shortcut to the same bytes) and writes the line with
// one Write. A run's workflow.started line is held back until the run's
// next line, and written with it in the same Write: a short run (a
// served request) costs one write(2) instead of two, and its lines are
// still written before the run returns, so before its reply is sent. A
// held line waits at most heldFor, and Close writes any still held.
type lineSink struct {
	out    *sinkOut
	level  slog.Leveler
	format func(io.Writer) slog.Handler // slog's handler with this sink's With state
	pool   *sync.Pool                   // of *lineBuf built with format
	// plainText: format is slog's text handler with no options but the
	// level and no With state, whose lines appendTextLine can write.
	plainText bool
}

// sinkOut is what every sink derived with WithAttrs/WithGroup shares: the
// writer, and the lines held back.
type sinkOut struct {
	// mu serialises the writes (as slog's own handlers do), and taking a
	// held line and writing it happen under it, so a run's held line is
	// never written after the run's next line.
	mu     sync.Mutex
	w      io.Writer
	held   map[string]*lineBuf // by execution_id
	closed bool
	// One timer writes the lines held for heldFor, armed while any is held:
	// cheaper than a timer per run.
	timer *time.Timer
	armed bool
}

// lineBuf is one formatter writing into its own buffer. A held line stays
// in its lineBuf (no copy) until it is written; the buffer then goes back
// to the pool of the sink it came from, whose formatter it has.
type lineBuf struct {
	buf   []byte
	clock logClock // appendTextLine's
	h     slog.Handler
	pool  *sync.Pool
	at    time.Time // when it was held
}

func (lb *lineBuf) release() { lb.pool.Put(lb) }

// Write is the formatter's writer: slog's handlers write a line with one
// Write.
func (lb *lineBuf) Write(p []byte) (int, error) {
	lb.buf = append(lb.buf, p...)
	return len(p), nil
}

func newLineSink(w io.Writer, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	return newDerivedSink(&sinkOut{w: w, held: map[string]*lineBuf{}}, level, format)
}

func newDerivedSink(out *sinkOut, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	s := &lineSink{out: out, level: level, format: format}
	s.pool = &sync.Pool{}
	s.pool.New = func() any {
		lb := &lineBuf{pool: s.pool}
		lb.h = format(lb)
		return lb
	}
	return s
}

func (s *lineSink) Enabled(_ context.Context, l slog.Level) bool {
	return l >= s.level.Level()
}

func (s *lineSink) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return s
	}
	format := s.format
	return newDerivedSink(s.out, s.level, func(w io.Writer) slog.Handler { return format(w).WithAttrs(attrs) })
}

func (s *lineSink) WithGroup(name string) slog.Handler {
	if name == "" {
		return s
	}
	format := s.format
	return newDerivedSink(s.out, s.level, func(w io.Writer) slog.Handler { return format(w).WithGroup(name) })
}

func (s *lineSink) Handle(ctx context.Context, r slog.Record) error {
	lb := s.pool.Get().(*lineBuf)
	var ok bool
	if f := textShortcut; f != nil && s.plainText {
		lb.buf, ok = f(lb.buf[:0], &r, &lb.clock)
	}
	if !ok {
		lb.buf = lb.buf[:0]
		if err := lb.h.Handle(ctx, r); err != nil {
			lb.release()
			return err
		}
	}
	id := runOf(&r)
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	out := lb
	if h := o.held[id]; h != nil && id != "" {
		delete(o.held, id)
		h.buf = append(h.buf, lb.buf...)
		lb.release()
		out = h
	}
	if id != "" && r.Message == "workflow.started" && !o.closed {
		out.at = time.Now()
		o.held[id] = out
		o.arm(heldFor)
		return nil
	}
	_, err := o.w.Write(out.buf)
	out.release()
	return err
}

// textShortcut is appendTextLine in a binary that calls
// EnableServingAudit, else nil: a binary that never does (a one-shot
// binary) does not link the shortcut, and all its lines go through slog.
var textShortcut func(b []byte, r *slog.Record, clock *logClock) ([]byte, bool)

// EnableServingAudit lets text audit loggers write the lines of a run's
// own events with appendTextLine. The http family calls it in its init:
// a served request logs two lines, and slog's generic path was a
// sizeable share of its cost.
func EnableServingAudit() { textShortcut = appendTextLine }

// ServingAudit reports whether EnableServingAudit has run.
func ServingAudit() bool { return textShortcut != nil }

// arm starts the timer unless it is running. Called with mu held.
func (o *sinkOut) arm(d time.Duration) {
	if o.armed {
		return
	}
	o.armed = true
	if o.timer == nil {
		o.timer = time.AfterFunc(d, o.writeDue)
	} else {
		o.timer.Reset(d)
	}
}

// runOf is the record's execution_id attribute ("" for events outside a
// run). The engine adds it first.
func runOf(r *slog.Record) string {
	var id string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "execution_id" && a.Value.Kind() == slog.KindString {
			id = a.Value.String()
			return false
		}
		return true
	})
	return id
}

// writeDue writes the lines held for heldFor or longer, and rearms the
// timer for the next one due. Lines of different runs are not ordered
// among themselves (each carries its time).
func (o *sinkOut) writeDue() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed = false
	if o.closed {
		return
	}
	now := time.Now()
	next := heldFor
	for id, h := range o.held {
		if wait := heldFor - now.Sub(h.at); wait > 0 {
			next = min(next, wait)
			continue
		}
		delete(o.held, id)
		_, _ = o.w.Write(h.buf)
		h.release()
	}
	if len(o.held) > 0 {
		o.arm(next)
	}
}

// Close writes every line still held; later started lines are written at
// once. It leaves the writer open (the files' closer closes them).
func (s *lineSink) Close() error {
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.timer != nil {
		o.timer.Stop()
	}
	var first error
	for id, h := range o.held {
		delete(o.held, id)
		if _, err := o.w.Write(h.buf); err != nil && first == nil {
			first = err
		}
		h.release()
	}
	return first
}
