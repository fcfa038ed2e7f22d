// Package tomlkeys finds where keys are defined in TOML source, so that
// errors about decoded values can name a line.
package tomlkeys

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnworks/kiln/runtime/nesting"
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

// Index maps key paths to their first definition. It is a tree of key
// parts and array elements rather than a map of path strings, so that its
// size stays linear in the source: a path string is as long as the nesting
// is deep, and there is one per key and per array element.
type Index struct {
	root  *node
	edges map[edge]*node
}

// node is one key or array element of the document.
type node struct {
	at    Pos     // where it is first defined; Line 0 until then
	elems []*node // array elements, in order
	// tables marks an array of tables: a header naming it refers to its
	// last element.
	tables bool
	// alias, when set, is the node whose keys this one has (see Alias).
	alias *node
}

// edge names a key part below a node.
type edge struct {
	parent *node
	name   string
}

func newIndex() Index {
	return Index{root: &node{}, edges: map[edge]*node{}}
}

// child returns the node of key name below n, or nil.
func (ix Index) child(n *node, name string) *node {
	if n.alias != nil {
		n = n.alias
	}
	return ix.edges[edge{n, name}]
}

// define returns the node of key name below n, creating it, and records
// at as its definition unless it has one.
func (ix Index) define(n *node, name string, at Pos) *node {
	c := ix.edges[edge{n, name}]
	if c == nil {
		c = &node{}
		ix.edges[edge{n, name}] = c
	}
	c.record(at)
	return c
}

func (n *node) record(at Pos) {
	if n.at.Line == 0 {
		n.at = at
	}
}

// appendElem adds an array element defined at at.
func (n *node) appendElem(at Pos) *node {
	e := &node{at: at}
	n.elems = append(n.elems, e)
	return e
}

// walk follows path (as JoinKey and JoinIndex write it) from the root and
// returns the nodes it passes, calling visit on each; it stops where the
// path leaves the index or does not parse, and reports whether it reached
// the end.
func (ix Index) walk(path string, visit func(*node)) bool {
	if ix.root == nil {
		return false
	}
	n := ix.root
	for i := 0; i < len(path); {
		var next *node
		switch c := path[i]; {
		case c == '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return false
			}
			k, err := strconv.Atoi(path[i+1 : i+j])
			if err != nil || k < 0 || k >= len(n.elems) {
				return false
			}
			next, i = n.elems[k], i+j+1
		case c == '"':
			j := i + 1
			for j < len(path) && path[j] != '"' {
				if path[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(path) {
				return false
			}
			name, err := strconv.Unquote(path[i : j+1])
			if err != nil {
				return false
			}
			next, i = ix.child(n, name), j+1
		default:
			j := i
			for j < len(path) && path[j] != '.' && path[j] != '[' {
				j++
			}
			next, i = ix.child(n, path[i:j]), j
		}
		if next == nil {
			return false
		}
		n = next
		visit(n)
		if i < len(path) && path[i] == '.' {
			i++
		}
	}
	return true
}

// Lookup returns the position of path, or of its nearest indexed parent.
func (ix Index) Lookup(path string) Pos {
	var at Pos
	ix.walk(path, func(n *node) {
		if n.at.Line > 0 {
			at = n.at
		}
	})
	return at
}

// Find returns the position of path itself, if it is indexed.
func (ix Index) Find(path string) (Pos, bool) {
	var last *node
	if !ix.walk(path, func(n *node) { last = n }) || last == nil || last.at.Line == 0 {
		return Pos{}, false
	}
	return last.at, true
}

// Alias makes path and the keys below it resolve as target and its keys
// do (the loader reads a one-element array of tables as that table).
// Array elements of path stay its own.
func (ix Index) Alias(path, target string) {
	var from, to *node
	if !ix.walk(path, func(n *node) { from = n }) || !ix.walk(target, func(n *node) { to = n }) || from == nil || to == nil {
		return
	}
	for to.alias != nil {
		to = to.alias
	}
	if from != to {
		from.at, from.alias = to.at, to
	}
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

// Scan scans TOML source and records where every key is defined. The
// source must have passed nesting.TOML (the loader decodes it first):
// values nested deeper than nesting.MaxDepth are passed over, not indexed.
func Scan(src string) Index {
	s := &keyScanner{src: src, line: 1, ix: newIndex()}
	s.document()
	return s.ix
}

type keyScanner struct {
	src   string
	i     int
	line  int
	depth int // open inline tables and arrays
	ix    Index
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

// triple reports whether three q quotes start at the current byte.
func (s *keyScanner) triple(q byte) bool {
	return s.i+2 < len(s.src) && s.src[s.i] == q && s.src[s.i+1] == q && s.src[s.i+2] == q
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
	table := s.ix.root
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

// header reads [a.b] or [[a.b]] and returns the table it opens.
func (s *keyScanner) header() *node {
	at := Pos{s.line, s.i}
	s.advance()
	array := s.peek() == '['
	if array {
		s.advance()
	}
	segs := s.key()
	s.skipToLineEnd()
	n := s.ix.root
	for i, seg := range segs {
		n = s.ix.define(n, seg, at)
		if array && i == len(segs)-1 {
			n.tables = true
			return n.appendElem(at)
		}
		// A header below an array of tables is in its last element.
		if n.tables && len(n.elems) > 0 {
			n = n.elems[len(n.elems)-1]
			n.record(at)
		}
	}
	return n
}

// keyValue reads `key = value` in table.
func (s *keyScanner) keyValue(table *node) {
	at := Pos{s.line, s.i}
	segs := s.key()
	if len(segs) == 0 {
		s.skipToLineEnd()
		return
	}
	n := table
	for _, seg := range segs {
		n = s.ix.define(n, seg, at)
	}
	s.skipSpace(false)
	if s.peek() != '=' {
		s.skipToLineEnd()
		return
	}
	s.advance()
	s.skipSpace(false)
	s.value(n)
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
func (s *keyScanner) value(n *node) {
	switch s.peek() {
	case '"', '\'':
		s.str()
	case '{', '[':
		if s.depth >= nesting.MaxDepth {
			s.skipNested()
			return
		}
		s.depth++
		if s.peek() == '{' {
			s.inlineTable(n)
		} else {
			s.array(n)
		}
		s.depth--
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

// skipNested passes over an inline table or array without indexing it,
// and without recursion.
func (s *keyScanner) skipNested() {
	open := 0
	for !s.eof() {
		switch s.peek() {
		case '"', '\'':
			s.str()
			continue
		case '#':
			s.skipComment()
			continue
		case '{', '[':
			open++
		case '}', ']':
			open--
		}
		s.advance()
		if open == 0 {
			return
		}
	}
}

func (s *keyScanner) inlineTable(n *node) {
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
		s.keyValue(n)
		if s.i == start {
			s.advance()
		}
	}
}

func (s *keyScanner) array(n *node) {
	s.advance() // [
	for !s.eof() {
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
		s.value(n.appendElem(Pos{s.line, s.i}))
		if s.i == start {
			s.advance()
		}
	}
}

// str reads a basic, literal or multi-line string and returns its value
// (escapes decoded on a best-effort basis; only keys need the value).
func (s *keyScanner) str() string {
	q := s.peek()
	if s.triple(q) {
		s.i += 3
		start := s.i
		for !s.eof() {
			if s.peek() == '\\' && q == '"' && s.i+1 < len(s.src) {
				s.advance()
				s.advance()
				continue
			}
			if s.triple(q) {
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
// definition of a path that is key once its indices are dropped, else of
// the nearest such parent. It returns 0 when nothing matches.
func (ix Index) FirstLine(key []string) int {
	if ix.root == nil {
		return 0
	}
	line := 0
	// The nodes whose paths without indices are key[:depth], with their
	// elements at any depth.
	level := withElems(nil, ix.root)
	for _, name := range key {
		var next []*node
		for _, n := range level {
			if c := ix.child(n, name); c != nil {
				next = withElems(next, c)
			}
		}
		if len(next) == 0 {
			break
		}
		level = next
		best := 0
		for _, n := range level {
			if l := n.at.Line; l > 0 && (best == 0 || l < best) {
				best = l
			}
		}
		if best > 0 {
			line = best
		}
	}
	return line
}

// withElems appends n and its array elements, theirs, and so on.
func withElems(list []*node, n *node) []*node {
	start := len(list)
	list = append(list, n)
	for i := start; i < len(list); i++ {
		list = append(list, list[i].elems...)
	}
	return list
}
