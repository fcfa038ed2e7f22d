package runtime

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// heldFor bounds how long a run's workflow.started line may wait for the
// run's next line before it is written on its own.
const heldFor = 100 * time.Millisecond

// maxSpare bounds the queue buffer kept between writes (a burst of lines
// may grow it; a larger one is left to the collector).
const maxSpare = 64 << 10

// lineSink is the audit logger's last handler. It formats each record
// with slog's text or JSON handler into a buffer of its own (so the bytes
// are exactly slog's) and writes the line with one Write. A run's
// workflow.started line is held back until the run's next line, and
// written with it in the same Write: a short run (a served request) costs
// one write(2) instead of two, and its lines are still written before the
// run returns, so before its reply is sent. A held line waits at most
// heldFor, and Close writes any still held.
//
// Writes are group commits: the lines of runs that end while a Write is
// in progress are queued, and the first of them to find no Write in
// progress writes the whole queue in one Write. Every caller returns only
// once the Write that carried its lines has returned, so the promise
// above holds for each of them; many concurrent runs cost few write(2)s.
type lineSink struct {
	out    *sinkOut
	level  slog.Leveler
	format func(io.Writer) slog.Handler // slog's handler with this sink's With state
	pool   *sync.Pool                   // of *lineBuf built with format
}

// sinkOut is what every sink derived with WithAttrs/WithGroup shares: the
// writer, the lines held back and the lines queued for the next Write.
type sinkOut struct {
	// mu guards every field. Taking a held line and queueing it happen
	// under it, and the queue is written in order, one Write at a time,
	// so a run's held line is never written after the run's next line.
	mu     sync.Mutex
	w      io.Writer
	held   map[string]*lineBuf // by execution_id
	closed bool
	// One timer writes the lines held for heldFor, armed while any is held:
	// cheaper than a timer per run.
	timer *time.Timer
	armed bool

	// Group commit: queue holds the lines of batch next, not yet written.
	// While writing is set, one caller writes it with mu released; the
	// others wait for its done.
	queue   []byte
	next    *batch
	writing *batch
	spare   []byte // the last written queue's buffer, reused
}

// batch is the lines of one Write: done is closed when the Write has
// returned, with its error in err.
type batch struct {
	done chan struct{}
	err  error
}

// lineBuf is one formatter writing into its own buffer. A held line stays
// in its lineBuf (no copy) until it is written; the buffer then goes back
// to the pool of the sink it came from, whose formatter it has.
type lineBuf struct {
	buf  bytes.Buffer
	h    slog.Handler
	pool *sync.Pool
	at   time.Time // when it was held
}

func (lb *lineBuf) release() { lb.pool.Put(lb) }

func newLineSink(w io.Writer, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	return newDerivedSink(&sinkOut{w: w, held: map[string]*lineBuf{}}, level, format)
}

func newDerivedSink(out *sinkOut, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	s := &lineSink{out: out, level: level, format: format}
	s.pool = &sync.Pool{}
	s.pool.New = func() any {
		lb := &lineBuf{pool: s.pool}
		lb.h = format(&lb.buf)
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
	lb.buf.Reset()
	if err := lb.h.Handle(ctx, r); err != nil {
		lb.release()
		return err
	}
	id := runOf(&r)
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.held[id]; h != nil && id != "" {
		delete(o.held, id)
		o.enqueue(h)
	} else if id != "" && r.Message == "workflow.started" && !o.closed {
		lb.at = time.Now()
		o.held[id] = lb
		o.arm(heldFor)
		return nil
	}
	return o.await(o.enqueue(lb))
}

// enqueue adds lb's line to the next Write, releases lb and returns that
// Write's batch. Called with mu held.
func (o *sinkOut) enqueue(lb *lineBuf) *batch {
	if o.next == nil {
		o.next = &batch{done: make(chan struct{})}
	}
	o.queue = append(o.queue, lb.buf.Bytes()...)
	lb.release()
	return o.next
}

// await returns once b is written, with the error of its Write. When no
// Write is in progress the caller writes the queue itself (b's lines and
// any queued after them); else it waits for the Write in progress, then
// looks again. Called with mu held, which it releases while it waits or
// writes.
func (o *sinkOut) await(b *batch) error {
	for {
		select {
		case <-b.done:
			return b.err
		default:
		}
		if w := o.writing; w != nil {
			o.mu.Unlock()
			<-w.done
			o.mu.Lock()
			continue
		}
		o.writeQueue()
	}
}

// writeQueue writes the queued lines in one Write, with mu released so
// that other runs' lines can queue meanwhile. Called with mu held.
func (o *sinkOut) writeQueue() {
	b, buf := o.next, o.queue
	o.next, o.queue, o.spare = nil, o.spare[:0], nil
	o.writing = b
	o.mu.Unlock()
	_, b.err = o.w.Write(buf)
	o.mu.Lock()
	o.writing = nil
	if cap(buf) <= maxSpare {
		o.spare = buf
	}
	close(b.done)
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

// writeDue writes the lines held for heldFor or longer, and rearms the
// timer for the next one due.
func (o *sinkOut) writeDue() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.armed = false
	if o.closed {
		return
	}
	if next, _ := o.writeHeld(false); len(o.held) > 0 {
		o.arm(next)
	}
}

// writeHeld writes the lines held for heldFor or longer (all of them when
// all is set) and returns how long until the next one is due. Lines of
// different runs are not ordered among themselves (each carries its
// time). Called with mu held.
func (o *sinkOut) writeHeld(all bool) (time.Duration, error) {
	now := time.Now()
	next := heldFor
	var b *batch
	for id, h := range o.held {
		if wait := heldFor - now.Sub(h.at); wait > 0 && !all {
			next = min(next, wait)
			continue
		}
		delete(o.held, id)
		b = o.enqueue(h)
	}
	if b == nil {
		return next, nil
	}
	return next, o.await(b)
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
	_, err := o.writeHeld(true)
	return err
}
