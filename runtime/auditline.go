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
// served request's two lines this way costs about a quarter of slog's
// generic path (BenchmarkRunLineFormat; TestAppendTextLineIsSlogs and
// FuzzAppendTextLine hold the bytes to slog's).
func appendTextLine(b []byte, r *slog.Record, clock *logClock) (_ []byte, ok bool) {
	n := len(b)
	if !r.Time.IsZero() {
		if b, ok = clock.appendTime(append(b, "time="...), r.Time); !ok {
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

// logClock appends times as slog's text handler does: RFC 3339 with
// milliseconds, truncated (2026-11-28T00:13:32.158Z). It keeps the text
// of the last second it wrote: the many lines a served process logs in
// one second copy it instead of formatting the date again.
type logClock struct {
	_    [0]func()      // not comparable: no equality function in every binary
	loc  *time.Location // of the second kept; nil: none kept
	sec  int64          // Unix seconds
	date [len("2006-01-02T15:04:05")]byte
	zone [len("-07:00")]byte
	z    int // bytes of zone used ("Z" or "-07:00")
}

func (c *logClock) appendTime(b []byte, t time.Time) ([]byte, bool) {
	if sec, loc := t.Unix(), t.Location(); sec != c.sec || loc != c.loc {
		if y := t.Year(); y < 0 || y > 9999 {
			return b, false
		}
		var buf [len(time.RFC3339)]byte               // long enough: a 4-digit year
		text := t.AppendFormat(buf[:0], time.RFC3339) // 2006-01-02T15:04:05Z07:00
		copy(c.date[:], text)
		c.z = copy(c.zone[:], text[len(c.date):])
		c.sec, c.loc = sec, loc
	}
	ms := t.Nanosecond() / int(time.Millisecond)
	b = append(append(b, c.date[:]...), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, c.zone[:c.z]...), true
}

// plainText reports whether slog's text handler writes s as it is:
// non-empty, and only letters, digits and - _ . : / @ + , % (a subset of
// what slog leaves unquoted).
func plainText(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte is the set of plainText's bytes (a literal: no init code).
var plainByte = [256]bool{
	'a': true, 'b': true, 'c': true, 'd': true, 'e': true, 'f': true, 'g': true, 'h': true, 'i': true,
	'j': true, 'k': true, 'l': true, 'm': true, 'n': true, 'o': true, 'p': true, 'q': true, 'r': true,
	's': true, 't': true, 'u': true, 'v': true, 'w': true, 'x': true, 'y': true, 'z': true, 'A': true,
	'B': true, 'C': true, 'D': true, 'E': true, 'F': true, 'G': true, 'H': true, 'I': true, 'J': true,
	'K': true, 'L': true, 'M': true, 'N': true, 'O': true, 'P': true, 'Q': true, 'R': true, 'S': true,
	'T': true, 'U': true, 'V': true, 'W': true, 'X': true, 'Y': true, 'Z': true, '0': true, '1': true,
	'2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true, '-': true,
	'_': true, '.': true, ':': true, '/': true, '@': true, '+': true, ',': true, '%': true,
}
