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

// lineSink is the audit logger's last handler. It formats each record
// with slog's text or JSON handler into a buffer of its own (so the bytes
// are exactly slog's) and writes the line with one Write. A run's
// workflow.started line is held back until the run's next line, and
// written with it in the same Write: a short run (a served request) costs
// one write(2) instead of two, and its lines are still written before the
// run returns, so before its reply is sent. A held line waits at most
// heldFor, and Close writes any still held.
type lineSink struct {
	out    *sinkOut
	level  slog.Leveler
	format func(io.Writer) slog.Handler // slog's handler with this sink's With state
	pool   *sync.Pool                   // of *lineBuf built with format
}

// sinkOut is what every sink derived with WithAttrs/WithGroup shares: the
// writer, and the lines held back.
type sinkOut struct {
	// mu serialises the writes (as slog's own handlers do), and taking a
	// held line and writing it happen under it, so a run's held line is
	// never written after the run's next line.
	mu     sync.Mutex
	w      io.Writer
	held   map[string]*heldLine // by execution_id
	closed bool
}

type heldLine struct {
	line  []byte
	timer *time.Timer
}

// lineBuf is one formatter writing into its own buffer.
type lineBuf struct {
	buf bytes.Buffer
	h   slog.Handler
}

func newLineSink(w io.Writer, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	return newDerivedSink(&sinkOut{w: w, held: map[string]*heldLine{}}, level, format)
}

func newDerivedSink(out *sinkOut, level slog.Leveler, format func(io.Writer) slog.Handler) *lineSink {
	s := &lineSink{out: out, level: level, format: format}
	s.pool = &sync.Pool{New: func() any {
		lb := &lineBuf{}
		lb.h = format(&lb.buf)
		return lb
	}}
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
	defer s.pool.Put(lb)
	lb.buf.Reset()
	if err := lb.h.Handle(ctx, r); err != nil {
		return err
	}
	id := runOf(&r)
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	line := lb.buf.Bytes()
	if h := o.held[id]; h != nil && id != "" {
		delete(o.held, id)
		h.timer.Stop()
		line = append(h.line, line...)
	}
	if id != "" && r.Message == "workflow.started" && !o.closed {
		o.held[id] = &heldLine{line: bytes.Clone(line), timer: time.AfterFunc(heldFor, func() { o.flush(id) })}
		return nil
	}
	_, err := o.w.Write(line)
	return err
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

// flush writes run id's held line, if it is still held.
func (o *sinkOut) flush(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h := o.held[id]; h != nil {
		delete(o.held, id)
		_, _ = o.w.Write(h.line)
	}
}

// Close writes every line still held; later started lines are written at
// once. It leaves the writer open (the files' closer closes them).
func (s *lineSink) Close() error {
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	var first error
	for id, h := range o.held {
		delete(o.held, id)
		h.timer.Stop()
		if _, err := o.w.Write(h.line); err != nil && first == nil {
			first = err
		}
	}
	return first
}
