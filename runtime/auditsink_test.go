package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestAuditSinkBytesAreSlogs: the sink writes exactly what slog's own
// text and JSON handlers write for the same records, With state included.
func TestAuditSinkBytesAreSlogs(t *testing.T) {
	at := time.Date(2026, 11, 25, 16, 30, 1, 234567891, time.UTC)
	recs := []slog.Record{}
	add := func(level slog.Level, msg string, attrs ...slog.Attr) {
		r := slog.NewRecord(at, level, msg, 0)
		r.AddAttrs(attrs...)
		recs = append(recs, r)
	}
	add(slog.LevelInfo, "plain", slog.String("k", "v"), slog.Int("n", -3), slog.Bool("b", true))
	add(slog.LevelInfo, "workflow.completed", slog.String("execution_id", "r1"), slog.String("status", "completed"),
		slog.Int64("elapsed_ms", 0))
	add(slog.LevelWarn, "needs quoting", slog.String("space", "a b"), slog.String("eq", "a=b"), slog.String("empty", ""),
		slog.String("quote", `say "hi"`), slog.String("ctl", "a\tb\n"), slog.String("uni", "héllo\u00a0x"), slog.String("bad", "\xff"))
	add(slog.LevelDebug, "numbers", slog.Float64("f", 1.5e-7), slog.Uint64("u", 1<<63), slog.Duration("d", 1500*time.Millisecond),
		slog.Time("t", at.Add(time.Hour)))
	add(slog.LevelInfo, "zone", slog.Time("t", at.In(time.FixedZone("x", -3*3600-1800))), slog.Float64("big", 1e21), slog.Int("z", 0))
	add(slog.LevelError, "structured", slog.Any("err", errors.New("boom")), slog.Group("g", slog.String("a", "1"), slog.Int("b", 2)),
		slog.Any("m", map[string]int{"x": 1}))
	add(slog.LevelInfo+2, "key with space", slog.String("a key", "v"))
	add(slog.LevelDebug-1, "", slog.String("k", "\x7f\\ok"), slog.String("", "empty key"))
	recs = append(recs, slog.NewRecord(time.Time{}, slog.LevelInfo, "no time", 0))
	for _, format := range []string{"text", "json"} {
		opts := &slog.HandlerOptions{Level: slog.LevelDebug}
		mk := func(w io.Writer) slog.Handler {
			if format == "json" {
				return slog.NewJSONHandler(w, opts)
			}
			return slog.NewTextHandler(w, opts)
		}
		var got, want bytes.Buffer
		sink := newLineSink(&got, slog.LevelDebug, mk)
		sink.plainText = format == "text" // as NewAuditLogger sets it
		sh, wh := slog.Handler(sink), mk(&want)
		for i, r := range recs {
			if i == 3 { // With state applies to the records after it
				sh = sh.WithAttrs([]slog.Attr{slog.String("run", "r 1")}).WithGroup("grp")
				wh = wh.WithAttrs([]slog.Attr{slog.String("run", "r 1")}).WithGroup("grp")
			}
			if err := sh.Handle(context.Background(), r.Clone()); err != nil {
				t.Fatal(err)
			}
			if err := wh.Handle(context.Background(), r.Clone()); err != nil {
				t.Fatal(err)
			}
		}
		if got.String() != want.String() {
			t.Errorf("%s: sink wrote\n%s\nslog writes\n%s", format, got.String(), want.String())
		}
	}
}

// writeCounter counts Write calls; it is safe for concurrent use.
type writeCounter struct {
	mu     sync.Mutex
	writes int
	buf    bytes.Buffer
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

// TestAuditOneWritePerShortRun: a run's workflow.started line is written
// with its end line, in one Write, in that order.
func TestAuditOneWritePerShortRun(t *testing.T) {
	var w writeCounter
	l, closer, err := NewAuditLogger(AuditOptions{Stderr: &w})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	r := runT(t, &Engine{Audit: l}, compileT(t, []workflow.Node{out("a", `1`)}, nil), RunOptions{})
	wantStatus(t, r, StatusCompleted, "a")
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if w.writes != 1 || len(lines) != 2 || !strings.Contains(lines[0], "msg=workflow.started") ||
		!strings.Contains(lines[1], "msg=workflow.completed") {
		t.Fatalf("%d writes:\n%s", w.writes, w.buf.String())
	}
}

// TestAuditRunLinesWrittenBeforeRunReturns is the durability promise of
// serve mode: when a run returns (and its reply can be sent), every line
// it logged, workflow.started included, is already in the log file.
func TestAuditRunLinesWrittenBeforeRunReturns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, closer, err := NewAuditLogger(AuditOptions{Target: "file:" + path})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	e := &Engine{Audit: l}
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	for i := 1; i <= 20; i++ {
		r := runT(t, e, p, RunOptions{})
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		started := bytes.Count(data, []byte("msg=workflow.started execution_id="+r.ExecutionID+" "))
		completed := bytes.Count(data, []byte("msg=workflow.completed execution_id="+r.ExecutionID+" "))
		if started != 1 || completed != 1 || bytes.Count(data, []byte("\n")) != 2*i {
			t.Fatalf("after run %d returned, the file holds %d started and %d completed lines of it:\n%s", i, started, completed, data)
		}
	}
}

// TestAuditHeldLineIsWrittenAlone: a started line whose run logs nothing
// more is written on its own after heldFor, and Close writes held lines at
// once.
func TestAuditHeldLineIsWrittenAlone(t *testing.T) {
	var w writeCounter
	l, closer, err := NewAuditLogger(AuditOptions{Stderr: &w})
	if err != nil {
		t.Fatal(err)
	}
	started := func(id string) {
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.started", 0)
		r.AddAttrs(slog.String("execution_id", id), slog.String("workflow", "t"))
		if err := l.Handler().Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	contains := func(s string) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return strings.Contains(w.buf.String(), s)
	}
	waitFor := func(s string) {
		deadline := time.Now().Add(10 * time.Second) // generous: heldFor is 100 ms
		for !contains(s) {
			if time.Now().After(deadline) {
				t.Fatalf("held started line %q was never written on its own", s)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	started("long-run")
	if contains("long-run") {
		t.Fatal("a started line was written at once, not held for its run's next line")
	}
	waitFor("execution_id=long-run")
	// The timer is armed again for later runs.
	started("second")
	started("third")
	waitFor("execution_id=second")
	waitFor("execution_id=third")

	started("at-close")
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	if !contains("execution_id=at-close") {
		t.Fatalf("Close did not write the held line:\n%s", w.buf.String())
	}
}

// TestAuditConcurrentRunsKeepTheirOrder: with many runs at once, each
// run's started line comes before its end line and each appears once.
func TestAuditConcurrentRunsKeepTheirOrder(t *testing.T) {
	var w writeCounter
	l, closer, err := NewAuditLogger(AuditOptions{Stderr: &w})
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Audit: l}
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	ids := make(chan string, 200)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				ids <- e.Run(context.Background(), p, RunOptions{}).ExecutionID
			}
		})
	}
	wg.Wait()
	close(ids)
	closer.Close()
	log := w.buf.String()
	n := 0
	for id := range ids {
		n++
		s := strings.Index(log, "msg=workflow.started execution_id="+id+" ")
		c := strings.Index(log, "msg=workflow.completed execution_id="+id+" ")
		if s < 0 || c < s || strings.Count(log, id) != 2 {
			t.Fatalf("run %s: started at %d, completed at %d:\n%s", id, s, c, log)
		}
	}
	if got := strings.Count(log, "\n"); got != 2*n {
		t.Errorf("%d lines for %d runs", got, n)
	}
}

// BenchmarkAuditRunLines: the two audit lines of a short run (started,
// completed) written to a real file from concurrent runs, by the sink
// and, for comparison, by slog's TextHandler as the audit logger used
// before (two write(2) calls per run).
func BenchmarkAuditRunLines(b *testing.B) {
	records := func(id string) (slog.Record, slog.Record) {
		s := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.started", 0)
		s.AddAttrs(slog.String("execution_id", id), slog.String("workflow", "bench"), slog.String("start_node", "main"),
			slog.Bool("dry_run", false), slog.String("trigger", "http"), slog.String("principal_kind", "anonymous"),
			slog.String("principal_name", "anonymous"))
		c := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.completed", 0)
		c.AddAttrs(slog.String("execution_id", id), slog.String("workflow", "bench"), slog.String("status", "completed"),
			slog.String("last_node", "ok"), slog.Int64("elapsed_ms", 0))
		return s, c
	}
	for _, name := range []string{"slog", "sink"} {
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit.log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			text := func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }
			h := text(f)
			if name == "sink" {
				sink := newLineSink(f, slog.LevelInfo, text)
				sink.plainText = true // as NewAuditLogger sets it for text
				defer sink.Close()
				h = sink
			}
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32) // 64 concurrent runs on 2 cores, as the serve bench
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					s, c := records(strconv.FormatInt(n.Add(1), 16))
					_ = h.Handle(context.Background(), s)
					_ = h.Handle(context.Background(), c)
				}
			})
		})
	}
}

// slowFile stands for a log file whose write(2) takes a while: each Write
// sleeps before its bytes count as written, so runs that end meanwhile
// wait behind it. It keeps what the Writes wrote.
type slowFile struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (f *slowFile) Write(p []byte) (int, error) {
	time.Sleep(time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.Write(p)
}

func (f *slowFile) holds(s string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Contains(f.buf.String(), s)
}

// TestAuditConcurrentRunsAreDurable: 64 concurrent runs share a slow log
// file. Each run, when it returns, finds both its lines written (the
// Write carrying them has returned), whatever the other runs do.
func TestAuditConcurrentRunsAreDurable(t *testing.T) {
	var f slowFile
	l, closer, err := NewAuditLogger(AuditOptions{Stderr: &f})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	e := &Engine{Audit: l}
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	const workers, each = 64, 8
	errs := make(chan string, 2*workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				id := e.Run(context.Background(), p, RunOptions{}).ExecutionID
				for _, msg := range []string{"workflow.started", "workflow.completed"} {
					if !f.holds("msg=" + msg + " execution_id=" + id + " ") {
						errs <- "run " + id + " returned before its " + msg + " line was written"
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := strings.Count(f.buf.String(), "\n"); got != 2*workers*each {
		t.Errorf("%d lines for %d runs", got, workers*each)
	}
}

// failingFile fails every Write.
type failingFile struct{ writes atomic.Int64 }

func (f *failingFile) Write(p []byte) (int, error) {
	f.writes.Add(1)
	time.Sleep(time.Millisecond)
	return 0, errors.New("disk full")
}

// TestAuditWriteErrorReachesEachCaller: with concurrent callers, every
// caller whose line was in a failed Write gets that Write's error.
func TestAuditWriteErrorReachesEachCaller(t *testing.T) {
	var f failingFile
	sink := newLineSink(&f, slog.LevelInfo, func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) })
	defer sink.Close()
	var wg sync.WaitGroup
	var failed atomic.Int64
	const n = 32
	for i := range n {
		wg.Go(func() {
			r := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.completed", 0)
			r.AddAttrs(slog.String("execution_id", strconv.Itoa(i)))
			if err := sink.Handle(context.Background(), r); err != nil && err.Error() == "disk full" {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != n {
		t.Fatalf("%d of %d callers saw the failed Write's error (%d Writes)", failed.Load(), n, f.writes.Load())
	}
}

// TestAuditWithoutServing: a binary that never enables the serving audit
// (a one-shot binary) formats every line with slog and keeps every
// promise of the sink.
func TestAuditWithoutServing(t *testing.T) {
	shortcut := textShortcut
	textShortcut = nil
	defer func() { textShortcut = shortcut }()
	for name, test := range map[string]func(*testing.T){
		"OneWritePerShortRun":          TestAuditOneWritePerShortRun,
		"RunLinesWrittenBeforeReturns": TestAuditRunLinesWrittenBeforeRunReturns,
		"HeldLineIsWrittenAlone":       TestAuditHeldLineIsWrittenAlone,
		"ConcurrentRunsKeepTheirOrder": TestAuditConcurrentRunsKeepTheirOrder,
		"ConcurrentRunsAreDurable":     TestAuditConcurrentRunsAreDurable,
		"WriteErrorReachesEachCaller":  TestAuditWriteErrorReachesEachCaller,
		"SinkBytesAreSlogs":            TestAuditSinkBytesAreSlogs,
	} {
		t.Run(name, test)
	}
}
