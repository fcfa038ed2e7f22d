package runtime

import (
	"context"
	"io"
	"log/slog"
	goruntime "runtime"
	"sync"
	"time"
)

// heldFor bounds how long a run's workflow.started line may wait for the
// run's next line before it is written on its own.
const heldFor = 100 * time.Millisecond

// lineSink is the audit logger's last handler. It formats each record
// with slog's text or JSON handler into a buffer of its own (so the bytes
// are exactly slog's; a run's own events take appendTextLine's shortcut
// to the same bytes) and hands the line to the sink's writer goroutine,
// which writes the lines of every run that ended meanwhile with one Write
// (group commit); Handle returns once the Write carrying its line has
// returned, with that Write's error. So a served request's lines are
// written before its reply is sent, and concurrent requests share one
// write(2) instead of paying one each. A run's workflow.started line is
// held back until the run's next line and written with it: a short run's
// two lines cost one line's share of a Write. A held line waits at most
// heldFor, and Close writes any still held.
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
// writer, the lines held back, and the lines waiting for the next Write.
type sinkOut struct {
	// mu guards every field below. Lines enter pending under it in the
	// order they are to be written, so a run's held line is never written
	// after the run's next line.
	mu     sync.Mutex
	w      io.Writer
	held   map[string]*lineBuf // by execution_id
	closed bool
	// One timer writes the lines held for heldFor, armed while any is held:
	// cheaper than a timer per run.
	timer *time.Timer
	armed bool

	// pending holds the lines of batch, which the writer goroutine writes
	// with its next Write. wake (capacity 1) tells it pending has lines;
	// the goroutine starts with the first line and ends at Close, closing
	// stopped.
	pending []byte
	batch   *batch
	wake    chan struct{}
	stopped chan struct{}
}

// batch is the lines one Write carries: done is closed when that Write
// has returned, and err is its error.
type batch struct {
	_    [0]func() // not comparable: no equality function in every binary
	done chan struct{}
	err  error
}

// maxSpare bounds the buffer the writer keeps between Writes: a burst
// of long lines does not pin its memory for the life of the process.
const maxSpare = 1 << 20

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
		o.mu.Unlock()
		return nil
	}
	b, err := o.put(out.buf)
	out.release()
	o.mu.Unlock()
	if b != nil {
		<-b.done
		return b.err
	}
	return err
}

// The serving audit, for binaries that serve many runs a second: nil in a
// binary that never calls EnableServingAudit (a one-shot binary), which
// then links neither, and writes each line (a short run's two lines) with
// a Write of its own.
var (
	// textShortcut formats a run's own events (appendTextLine).
	textShortcut func(b []byte, r *slog.Record, clock *logClock) ([]byte, bool)
	// groupCommit hands a line to the writer goroutine ((*sinkOut).enqueue).
	groupCommit func(o *sinkOut, line []byte) *batch
)

// EnableServingAudit turns on the audit logger's group commit and its
// formatting shortcut. The http family calls it in its init: a served
// request logs two lines, and slog's generic path and a write(2) per
// request are a sizeable share of its cost.
func EnableServingAudit() {
	textShortcut, groupCommit = appendTextLine, (*sinkOut).enqueue
}

// ServingAudit reports whether EnableServingAudit has run.
func ServingAudit() bool { return groupCommit != nil && textShortcut != nil }

// put writes line, or with group commit hands it to the writer goroutine
// and returns the batch to wait for (the line is written when its done
// is closed). Called with mu held.
func (o *sinkOut) put(line []byte) (*batch, error) {
	if enqueue := groupCommit; enqueue != nil && !o.closed {
		return enqueue(o, line), nil
	}
	// No writer goroutine (or it has ended: a line logged after Close).
	_, err := o.w.Write(line)
	return nil, err
}

// enqueue adds line to the next Write and returns the batch it is in,
// starting the writer goroutine with the first line (groupCommit).
// Called with mu held and the sink open.
func (o *sinkOut) enqueue(line []byte) *batch {
	if o.batch == nil {
		o.batch = &batch{done: make(chan struct{})}
		if o.wake == nil {
			o.wake, o.stopped = make(chan struct{}, 1), make(chan struct{})
			go o.writeBatches()
		}
		select {
		case o.wake <- struct{}{}:
		default: // already told
		}
	}
	o.pending = append(o.pending, line...)
	return o.batch
}

// writeBatches is the writer goroutine: each wake-up writes everything
// pending with one Write, until Close closes wake.
func (o *sinkOut) writeBatches() {
	var spare []byte
	for {
		_, open := <-o.wake
		if open {
			// Let the runs already ready to go on this core end and add
			// their lines first: under load this is what makes a batch hold
			// more than one run's lines.
			goruntime.Gosched()
		}
		o.mu.Lock()
		data, b := o.pending, o.batch
		o.pending, o.batch = spare[:0], nil
		o.mu.Unlock()
		if b != nil {
			_, b.err = o.w.Write(data)
			close(b.done)
		}
		if spare = data; cap(spare) > maxSpare {
			spare = nil
		}
		if !open {
			close(o.stopped)
			return
		}
	}
}

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

// writeDue hands the writer the lines held for heldFor or longer, and
// rearms the timer for the next one due. Lines of different runs are not
// ordered among themselves (each carries its time).
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
		_, _ = o.put(h.buf)
		h.release()
	}
	if len(o.held) > 0 {
		o.arm(next)
	}
}

// Close writes every line still held and waits for the writer goroutine
// to write what is pending and end; later lines are written at once. It
// returns the first error of those writes, and leaves the writer open
// (the files' closer closes them).
func (s *lineSink) Close() error {
	o := s.out
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	if o.timer != nil {
		o.timer.Stop()
	}
	var first error
	var last *batch
	for id, h := range o.held {
		delete(o.held, id)
		b, err := o.put(h.buf)
		if b != nil {
			last = b
		} else if first == nil {
			first = err
		}
		h.release()
	}
	o.closed = true
	wake, stopped := o.wake, o.stopped
	if wake != nil {
		close(wake)
	}
	o.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
	if first == nil && last != nil {
		first = last.err
	}
	return first
}
