package runtime

import (
	"log/slog"
	"strconv"
	"time"
)

// appendTextLine appends r as the audit logger's slog.TextHandler (no
// options but the level) writes it, for the records every run logs:
// string, integer and boolean attributes whose text needs no quoting.
// It is a shortcut, not a second format: for any other record (another
// kind of value, a string slog would quote, a time outside years
// 0000-9999) it returns ok false and the sink asks slog. Formatting a
// served request's two lines this way costs a third of slog's generic
// path (TestAppendTextLineIsSlogs and FuzzAppendTextLine hold the bytes to
// slog's).
func appendTextLine(b []byte, r *slog.Record) (_ []byte, ok bool) {
	n := len(b)
	if !r.Time.IsZero() {
		if b, ok = appendLogTime(append(b, "time="...), r.Time); !ok {
			return b[:n], false
		}
		b = append(b, ' ')
	}
	level := r.Level.String()
	if !plainText(level) || !plainText(r.Message) {
		return b[:n], false
	}
	b = append(append(append(append(b, "level="...), level...), " msg="...), r.Message...)
	ok = true
	r.Attrs(func(a slog.Attr) bool {
		if !plainText(a.Key) {
			ok = false
			return false
		}
		b = append(append(append(b, ' '), a.Key...), '=')
		switch a.Value.Kind() {
		case slog.KindString:
			s := a.Value.String()
			if ok = plainText(s); ok {
				b = append(b, s...)
			}
		case slog.KindInt64:
			b = strconv.AppendInt(b, a.Value.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, a.Value.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, a.Value.Bool())
		default:
			ok = false
		}
		return ok
	})
	if !ok {
		return b[:n], false
	}
	return append(b, '\n'), true
}

// appendLogTime appends t as slog's text handler does: RFC 3339 with
// milliseconds, truncated (2026-11-28T00:13:32.158Z).
func appendLogTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	const secs = len("2006-01-02T15:04:05")
	n := len(b)
	b = t.AppendFormat(b, time.RFC3339) // 2006-01-02T15:04:05Z07:00
	var zone [len("-07:00")]byte
	z := copy(zone[:], b[n+secs:])
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(b[:n+secs], '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, zone[:z]...), true
}

// plainText reports whether slog's text handler writes s as it is:
// non-empty, and only letters, digits and - _ . : / @ + , % (a subset of
// what slog leaves unquoted).
func plainText(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 128 || plainBytes[c>>6]&(1<<(c&63)) == 0 {
			return false
		}
	}
	return true
}

// plainBytes is the set of plainText's bytes, a bit per ASCII byte.
var plainBytes = [2]uint64{
	1<<'%' | 1<<'+' | 1<<',' | 1<<'-' | 1<<'.' | 1<<'/' | (1<<10-1)<<'0' | 1<<':',
	1<<('@'-64) | (1<<26-1)<<('A'-64) | 1<<('_'-64) | (1<<26-1)<<('a'-64),
}
