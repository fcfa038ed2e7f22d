package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// slogText is what the audit logger's slog.TextHandler writes for r.
func slogText(t testing.TB, r slog.Record) string {
	var buf bytes.Buffer
	if err := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestAppendTextLineIsSlogs: the shortcut writes slog's bytes for every
// record it takes, takes a run's own events, and leaves the rest to slog.
func TestAppendTextLineIsSlogs(t *testing.T) {
	at := time.Date(2026, 11, 28, 0, 13, 32, 158999999, time.UTC)
	rec := func(at time.Time, level slog.Level, msg string, attrs ...slog.Attr) slog.Record {
		r := slog.NewRecord(at, level, msg, 0)
		r.AddAttrs(attrs...)
		return r
	}
	taken := []slog.Record{
		rec(at, slog.LevelInfo, "workflow.started", slog.String("execution_id", "6b20d7ef36ccdce735e72300"),
			slog.String("workflow", "bench"), slog.String("start_node", "main"), slog.Bool("dry_run", false),
			slog.String("trigger", "http"), slog.String("principal_kind", "anonymous"), slog.String("principal_name", "anonymous")),
		rec(at, slog.LevelWarn, "workflow.failed", slog.String("execution_id", "x"), slog.String("status", "failed"),
			slog.String("last_node", "a-b_c.d"), slog.Int64("elapsed_ms", -12), slog.Uint64("u", math.MaxUint64), slog.Bool("t", true)),
		rec(time.Time{}, slog.LevelDebug-3, "no-time", slog.Int("n", 0)),
		rec(at.In(time.FixedZone("x", -(3*3600+1800))), slog.LevelInfo+2, "zone", slog.String("k", "a:b/c@d+e,f%")),
		rec(at.In(time.FixedZone("y", 5*3600+45*60)).Add(-158999999), slog.LevelError, "whole-second"),
		rec(time.Date(0, 1, 1, 0, 0, 0, 1e6, time.UTC), slog.LevelInfo, "year-zero"),
		rec(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), slog.LevelInfo, "year-9999"),
		rec(time.Unix(0, 123456789).In(time.Local), slog.LevelInfo, "local"),
	}
	// One clock for all, as a pooled line buffer has: each record's second
	// and location differ from the one before, and the first comes again
	// (the kept second).
	var clock logClock
	for _, r := range append(taken, taken[0], taken[0]) {
		got, ok := appendTextLine([]byte("prefix "), &r, &clock)
		if !ok {
			t.Errorf("%q: not taken", r.Message)
			continue
		}
		if want := "prefix " + slogText(t, r); string(got) != want {
			t.Errorf("%q:\n got %q\nwant %q", r.Message, got, want)
		}
	}
	left := []slog.Record{
		rec(at, slog.LevelInfo, "needs quoting"),
		rec(at, slog.LevelInfo, ""),
		rec(at, slog.LevelInfo, "m", slog.String("k", "a b")),
		rec(at, slog.LevelInfo, "m", slog.String("k", "")),
		rec(at, slog.LevelInfo, "m", slog.String("k", "a=b")),
		rec(at, slog.LevelInfo, "m", slog.String("k", `"q"`)),
		rec(at, slog.LevelInfo, "m", slog.String("k", "é")),
		rec(at, slog.LevelInfo, "m", slog.String("a key", "v")),
		rec(at, slog.LevelInfo, "m", slog.String("", "v")),
		rec(at, slog.LevelInfo, "m", slog.Float64("f", 1.5)),
		rec(at, slog.LevelInfo, "m", slog.Duration("d", time.Second)),
		rec(at, slog.LevelInfo, "m", slog.Time("t", at)),
		rec(at, slog.LevelInfo, "m", slog.Any("e", context.Canceled)),
		rec(at, slog.LevelInfo, "m", slog.Group("g", slog.String("a", "b"))),
		rec(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "year-10000"),
		rec(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "year-minus-one"),
	}
	for _, r := range left {
		if got, ok := appendTextLine([]byte("prefix "), &r, &clock); ok || string(got) != "prefix " {
			t.Errorf("%q %v: taken (%q), want it left to slog", r.Message, r, got)
		}
	}
}

// FuzzAppendTextLine: whatever the record, the shortcut writes slog's
// bytes or leaves it to slog.
func FuzzAppendTextLine(f *testing.F) {
	f.Add(int64(1764288812158999999), 0, int64(0), "workflow.started", "execution_id", "6b20d7ef", int64(-3), true)
	f.Add(int64(-62167219200000000), 8, int64(-12600), "m", "k", "a b", int64(0), false)
	var clock logClock // kept across inputs, as in a pooled line buffer
	f.Fuzz(func(t *testing.T, unixNano int64, level int, zone int64, msg, key, s string, i int64, b bool) {
		at := time.Unix(0, unixNano).In(time.FixedZone("z", int(zone%(24*3600))))
		r := slog.NewRecord(at, slog.Level(level), msg, 0)
		r.AddAttrs(slog.String(key, s), slog.Int64("i", i), slog.Bool("b", b))
		got, ok := appendTextLine(nil, &r, &clock)
		if !ok {
			if len(got) != 0 {
				t.Fatalf("left to slog, but wrote %q", got)
			}
			return
		}
		if want := slogText(t, r); string(got) != want {
			t.Fatalf("\n got %q\nwant %q", got, want)
		}
	})
}

// The runtime's tests run with the serving audit on, as a serving
// binary does (the http family enables it); TestAuditWithoutServing
// checks the one-shot binaries' path.
func init() { EnableServingAudit() }

// TestAuditLoggerTakesTheShortcut: the default audit logger (text) writes
// a run's lines through the shortcut; JSON and derived sinks (With
// state) go to slog.
func TestAuditLoggerTakesTheShortcut(t *testing.T) {
	var taken int
	textShortcut = func(b []byte, r *slog.Record, clock *logClock) ([]byte, bool) {
		b, ok := appendTextLine(b, r, clock)
		if ok {
			taken++
		}
		return b, ok
	}
	defer EnableServingAudit()
	p := compileT(t, []workflow.Node{out("a", `1`)}, nil)
	for format, want := range map[string]int{"": 2, "text": 2, "json": 0} {
		taken = 0
		var buf bytes.Buffer
		l, closer, err := NewAuditLogger(AuditOptions{Format: format, Stderr: &buf})
		if err != nil {
			t.Fatal(err)
		}
		runT(t, &Engine{Audit: l}, p, RunOptions{})
		_ = l.With("replica", "r1").Handler().Handle(context.Background(), slog.NewRecord(time.Now(), slog.LevelInfo, "derived", 0))
		closer.Close()
		if taken != want || !strings.Contains(buf.String(), "workflow.completed") {
			t.Errorf("format %q: %d lines through the shortcut, want %d:\n%s", format, taken, want, buf.String())
		}
	}
}

// BenchmarkRunLineFormat: formatting a served request's two lines
// (started, completed), by slog's text handler and by appendTextLine.
func BenchmarkRunLineFormat(b *testing.B) {
	started := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.started", 0)
	started.AddAttrs(slog.String("execution_id", "6b20d7ef36ccdce735e72300"), slog.String("workflow", "bench"),
		slog.String("start_node", "main"), slog.Bool("dry_run", false), slog.String("trigger", "http"),
		slog.String("principal_kind", "anonymous"), slog.String("principal_name", "anonymous"))
	completed := slog.NewRecord(time.Now(), slog.LevelInfo, "workflow.completed", 0)
	completed.AddAttrs(slog.String("execution_id", "6b20d7ef36ccdce735e72300"), slog.String("workflow", "bench"),
		slog.String("status", "completed"), slog.String("last_node", "ok"), slog.Int64("elapsed_ms", 0))
	b.Run("slog", func(b *testing.B) {
		var buf bytes.Buffer
		h := slog.NewTextHandler(&buf, nil)
		for b.Loop() {
			buf.Reset()
			_ = h.Handle(context.Background(), started)
			_ = h.Handle(context.Background(), completed)
		}
	})
	b.Run("appendTextLine", func(b *testing.B) {
		var buf []byte
		var clock logClock
		for b.Loop() {
			buf, _ = appendTextLine(buf[:0], &started, &clock)
			buf, _ = appendTextLine(buf, &completed, &clock)
		}
	})
}

// TestPlainTextBytes: plainText takes exactly letters, digits and
// - _ . : / @ + , %, each of which slog leaves unquoted.
func TestPlainTextBytes(t *testing.T) {
	const plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@+,%"
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		want := bytes.IndexByte([]byte(plain), byte(c)) >= 0
		if got := plainText(s); got != want {
			t.Errorf("plainText(%q) = %v, want %v", s, got, want)
		}
		if want && needsQuotes(t, s) {
			t.Errorf("slog quotes %q", s)
		}
	}
}

// needsQuotes reports whether slog's text handler quotes the value s.
func needsQuotes(t *testing.T, s string) bool {
	r := slog.NewRecord(time.Time{}, slog.LevelInfo, "m", 0)
	r.AddAttrs(slog.String("k", s))
	return slogText(t, r) != "level=INFO msg=m k="+s+"\n"
}
