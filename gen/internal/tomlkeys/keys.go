// Package tomlkeys finds where keys are defined in TOML source, so that
// errors about decoded values can name a line.
package tomlkeys

import (
	"fmt"
	"strconv"
	"strings"
)

// BurntSushi/toml reports where syntax errors are, but not where a decoded
// key came from (its MetaData keeps one position per dotted key, shared by
// every element of an array of tables). This file builds that index: a
// light scanner over source that is already known to be valid TOML, mapping
// each key path as kiln prints it (nodes[2].retry.on) to where it is
// defined. It never fails: on anything unexpected it skips ahead.

// Pos is where a key is defined: its 1-based line and byte offset.
type Pos struct {
	Line, Off int
}

// Index maps key paths to their first definition.
type Index map[string]Pos

// Lookup returns the position of path, or of its nearest indexed parent.
func (ix Index) Lookup(path string) Pos {
	for path != "" {
		if p, ok := ix[path]; ok {
			return p
		}
		path = parentPath(path)
	}
	return Pos{}
}

// parentPath drops the last segment of a key path.
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	// The last '.' outside quotes; quoted segments never hold '.' unescaped
	// except inside quotes, so scan from the end tracking quotes.
	inQuote := false
	for i := len(path) - 1; i >= 0; i-- {
		switch path[i] {
		case '"':
			if i == 0 || path[i-1] != '\\' {
				inQuote = !inQuote
			}
		case '.':
			if !inQuote {
				return path[:i]
			}
		}
	}
	return ""
}

// JoinKey appends a key segment to a path, quoting it unless it is a bare key.
func JoinKey(path, seg string) string {
	if !isBareKey(seg) {
		seg = strconv.Quote(seg)
	}
	if path == "" {
		return seg
	}
	return path + "." + seg
}

// JoinIndex appends an array index to a path.
func JoinIndex(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Scan scans TOML source and records where every key is defined.
func Scan(src string) Index {
	s := &keyScanner{src: src, line: 1, ix: Index{}, arrays: map[string]int{}}
	s.document()
	return s.ix
}

type keyScanner struct {
	src    string
	i      int
	line   int
	ix     Index
	arrays map[string]int // array-of-tables path -> elements seen so far
}

func (s *keyScanner) eof() bool { return s.i >= len(s.src) }

func (s *keyScanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

func (s *keyScanner) advance() {
	if s.src[s.i] == '\n' {
		s.line++
	}
	s.i++
}

func (s *keyScanner) record(path string, at Pos) {
	if _, ok := s.ix[path]; !ok && path != "" {
		s.ix[path] = at
	}
}

// skipSpace skips blanks and, when newlines is set, line breaks and comments.
func (s *keyScanner) skipSpace(newlines bool) {
	for !s.eof() {
		switch c := s.peek(); {
		case c == ' ' || c == '\t' || c == '\r':
			s.advance()
		case c == '\n' && newlines:
			s.advance()
		case c == '#' && newlines:
			s.skipComment()
		default:
			return
		}
	}
}

func (s *keyScanner) skipComment() {
	for !s.eof() && s.peek() != '\n' {
		s.advance()
	}
}

func (s *keyScanner) skipToLineEnd() {
	for !s.eof() && s.peek() != '\n' {
		if c := s.peek(); c == '"' || c == '\'' {
			s.str()
			continue
		}
		s.advance()
	}
}

func (s *keyScanner) document() {
	table := ""
	for !s.eof() {
		start := s.i
		s.skipSpace(true)
		if s.eof() {
			return
		}
		if s.peek() == '[' {
			table = s.header()
		} else {
			s.keyValue(table)
		}
		s.skipSpace(false)
		if !s.eof() && s.peek() == '#' {
			s.skipComment()
		}
		if s.i == start { // no progress: never loop forever on odd input
			s.advance()
		}
	}
}

// header reads [a.b] or [[a.b]] and returns the table path it opens.
func (s *keyScanner) header() string {
	at := Pos{s.line, s.i}
	s.advance()
	array := s.peek() == '['
	if array {
		s.advance()
	}
	segs := s.key()
	s.skipToLineEnd()
	if len(segs) == 0 {
		return ""
	}
	// Every prefix that is an array of tables refers to its last element.
	path := ""
	for i, seg := range segs {
		path = JoinKey(path, seg)
		if array && i == len(segs)-1 {
			n := s.arrays[path]
			s.arrays[path] = n + 1
			s.record(path, at)
			path = JoinIndex(path, n)
			break
		}
		s.record(path, at)
		if n, ok := s.arrays[path]; ok {
			path = JoinIndex(path, n-1)
		}
	}
	s.record(path, at)
	return path
}

// keyValue reads `key = value` under table.
func (s *keyScanner) keyValue(table string) {
	at := Pos{s.line, s.i}
	segs := s.key()
	if len(segs) == 0 {
		s.skipToLineEnd()
		return
	}
	path := table
	for _, seg := range segs {
		path = JoinKey(path, seg)
		s.record(path, at)
	}
	s.skipSpace(false)
	if s.peek() != '=' {
		s.skipToLineEnd()
		return
	}
	s.advance()
	s.skipSpace(false)
	s.value(path)
}

// key reads a dotted key: bare, "basic" or 'literal' segments.
func (s *keyScanner) key() []string {
	var segs []string
	for {
		s.skipSpace(false)
		switch c := s.peek(); {
		case c == '"' || c == '\'':
			segs = append(segs, s.str())
		case isBareByte(c):
			start := s.i
			for !s.eof() && isBareByte(s.peek()) {
				s.advance()
			}
			segs = append(segs, s.src[start:s.i])
		default:
			return segs
		}
		s.skipSpace(false)
		if s.peek() != '.' {
			return segs
		}
		s.advance()
	}
}

func isBareByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value reads one value; inline tables and arrays index their members.
func (s *keyScanner) value(path string) {
	switch s.peek() {
	case '"', '\'':
		s.str()
	case '{':
		s.inlineTable(path)
	case '[':
		s.array(path)
	default:
		// number, boolean or date-time (which may hold one space)
		for !s.eof() {
			c := s.peek()
			if c == ',' || c == ']' || c == '}' || c == '\n' || c == '#' {
				break
			}
			s.advance()
		}
	}
}

func (s *keyScanner) inlineTable(path string) {
	s.advance() // {
	for !s.eof() {
		start := s.i
		s.skipSpace(true)
		switch s.peek() {
		case '}':
			s.advance()
			return
		case ',':
			s.advance()
			continue
		}
		s.keyValue(path)
		if s.i == start {
			s.advance()
		}
	}
}

func (s *keyScanner) array(path string) {
	s.advance() // [
	for n := 0; !s.eof(); {
		start := s.i
		s.skipSpace(true)
		switch s.peek() {
		case ']':
			s.advance()
			return
		case ',':
			s.advance()
			continue
		}
		elem := JoinIndex(path, n)
		s.record(elem, Pos{s.line, s.i})
		s.value(elem)
		n++
		if s.i == start {
			s.advance()
		}
	}
}

// str reads a basic, literal or multi-line string and returns its value
// (escapes decoded on a best-effort basis; only keys need the value).
func (s *keyScanner) str() string {
	q := s.peek()
	if strings.HasPrefix(s.src[s.i:], strings.Repeat(string(q), 3)) {
		s.i += 3
		start := s.i
		for !s.eof() {
			if s.peek() == '\\' && q == '"' && s.i+1 < len(s.src) {
				s.advance()
				s.advance()
				continue
			}
			if strings.HasPrefix(s.src[s.i:], strings.Repeat(string(q), 3)) {
				// A multi-line string may end with up to two extra quotes.
				end := s.i + 3
				for n := 0; n < 2 && end < len(s.src) && s.src[end] == q; n++ {
					end++
				}
				body := s.src[start : end-3]
				s.i = end
				return body
			}
			s.advance()
		}
		return s.src[start:]
	}
	s.i++
	start := s.i
	for !s.eof() {
		c := s.peek()
		if c == '\n' {
			break
		}
		if c == '\\' && q == '"' {
			s.i += min(2, len(s.src)-s.i)
			continue
		}
		if c == q {
			break
		}
		s.i++
	}
	raw := s.src[start:s.i]
	if !s.eof() && s.peek() == q {
		s.i++
	}
	if q == '"' && strings.Contains(raw, `\`) {
		if v, err := strconv.Unquote(`"` + raw + `"`); err == nil {
			return v
		}
	}
	return raw
}

// FirstLine returns the line of key's first definition, key being a path
// without array indices as BurntSushi/toml reports undecoded keys (every
// element of an array of tables shares one such path): the earliest
// indexed path that is key once its indices are dropped, else the
// nearest such parent. It returns 0 when nothing matches.
func (ix Index) FirstLine(key []string) int {
	for n := len(key); n > 0; n-- {
		want := ""
		for _, seg := range key[:n] {
			want = JoinKey(want, seg)
		}
		best := 0
		for path, at := range ix {
			if (best == 0 || at.Line < best) && dropIndices(path) == want {
				best = at.Line
			}
		}
		if best > 0 {
			return best
		}
	}
	return 0
}

// dropIndices removes the [n] segments of a key path.
func dropIndices(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	inQuote := false
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '"' && (i == 0 || path[i-1] != '\\'):
			inQuote = !inQuote
		case c == '[' && !inQuote:
			for i < len(path) && path[i] != ']' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
