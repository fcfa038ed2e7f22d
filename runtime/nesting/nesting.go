// Package nesting refuses TOML and JSON documents that nest too deep,
// before any decoder sees them. The TOML decoder spends memory and time
// that grow with the square of the depth (it copies a table's full key
// path for every key, table and array inside it), so a 120 KB file of
// nested inline tables once took 15 GB. Each check is one pass over the
// bytes that allocates nothing and knows just enough of the syntax
// (strings, escapes, comments, table headers) to tell a bracket or a key
// from text. docs/validation-codes.md lists the limits.
package nesting

import (
	"fmt"
	"strconv"
)

// MaxDepth is how many tables and arrays may enclose one another.
const MaxDepth = 64

// MaxKeyPaths bounds the work the TOML decoder does on keys even below
// MaxDepth: each key, table and array costs 64, plus 16 per level of its
// path and the bytes of the key names on it (the decoder copies the full
// path for each), summed over the document. 2,000 inline tables nested
// 64 deep (520 KB) cost 150 M and took the decoder 1.1 GB; at the limit
// it takes about 70 MB; the largest workflow in this repository costs
// 31 K.
const MaxKeyPaths = 8 << 20

// Error is a TOML document refused before decoding: Line (1-based) is
// where the level past MaxDepth opens, or where the key paths pass
// MaxKeyPaths. Callers prefix the file name: "file:line: message".
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return "line " + strconv.Itoa(e.Line) + ": " + e.Msg }

// The messages of Error, constants rather than package variables set at
// start-up (TestMessages holds them to MaxDepth and MaxKeyPaths).
const (
	deeperMsg   = "nesting deeper than 64"
	keyPathsMsg = "keys too many or too deep: their paths add up to more than 8 MiB"
)

// What the decoder keeps for each key, table and array (entryCost), and
// for each level of its path (levelCost) besides the key names.
const (
	entryCost = 64
	levelCost = 16
)

// container is an open inline table or array, or the table of the last
// [header]: its level (the root table is 0) and the cost of its path.
type container struct {
	level, path int
	table       bool
}

// TOML checks a TOML document's nesting. It counts each part of a table
// header or dotted key as the table it names, each inline table and each
// array as one level; an array of tables [[a.b]] counts like [a.b]. It
// returns nil or an *Error. It does not validate: whatever it does not
// understand it passes over, and the decoder reports.
func TOML[Doc ~string | ~[]byte](doc Doc) error {
	_, err := scanTOML(doc, MaxKeyPaths)
	return err
}

// scanTOML is TOML with the key path limit as a parameter; it returns
// the cost of the key paths it read.
func scanTOML[Doc ~string | ~[]byte](doc Doc, maxKeyPaths int) (int, error) {
	var (
		stack [MaxDepth]container // open brackets; never deeper, by the check
		sp    int
		table container // the table of the last header, level 0 at first
		line  = 1
		total int
		// The key being read (key) or the value after its = (!key).
		key     = true
		parts   int // parts of the key read so far
		keyLvl  int // level of the table the current part is in
		keyPath int // path cost up to and including the current part
	)
	current := func() container {
		if sp > 0 {
			return stack[sp-1]
		}
		return table
	}
	charge := func(path int) error {
		total += entryCost + path
		if total > maxKeyPaths {
			return &Error{Line: line, Msg: keyPathsMsg}
		}
		return nil
	}
	// part records one part of a dotted key, size bytes long: every part
	// after the first means the one before names a table one level down.
	part := func(size int) error {
		if parts == 0 {
			c := current()
			keyLvl, keyPath = c.level, c.path
		} else if keyLvl++; keyLvl > MaxDepth {
			return &Error{Line: line, Msg: deeperMsg}
		}
		parts++
		keyPath += levelCost + size
		return charge(keyPath)
	}
	for i := 0; i < len(doc); {
		switch c := doc[i]; c {
		case '\n':
			line++
			i++
			if sp == 0 { // a top-level statement ends with its line
				key, parts = true, 0
			}
		case ' ', '\t', '\r':
			i++
		case '#':
			for i < len(doc) && doc[i] != '\n' {
				i++
			}
		case '"', '\'':
			end, lines := skipString(doc, i)
			if key {
				if err := part(end - i); err != nil {
					return total, err
				}
			}
			i, line = end, line+lines
		case '=':
			key = false
			i++
		case ',':
			if sp > 0 && stack[sp-1].table {
				key, parts = true, 0
			}
			i++
		case '[', '{':
			if c == '[' && key && sp == 0 && parts == 0 {
				// A [table] or [[array of tables]] header.
				end, t, err := header(doc, i, line, &total, maxKeyPaths)
				if err != nil {
					return total, err
				}
				if t.level > 0 {
					table = t
				}
				i, key = end, false // the rest of the line is not a key
				continue
			}
			// A value: an element of an array, or after a key's =. Each
			// opens a level below the container it is in, so the stack
			// never holds more than MaxDepth.
			var open container
			if p := current(); (sp > 0 && !p.table) || parts == 0 {
				open = container{level: p.level + 1, path: p.path + levelCost}
			} else {
				open = container{level: keyLvl + 1, path: keyPath}
			}
			if open.level > MaxDepth {
				return total, &Error{Line: line, Msg: deeperMsg}
			}
			if err := charge(open.path); err != nil {
				return total, err
			}
			open.table = c == '{'
			stack[sp] = open
			sp++
			key, parts = open.table, 0
			i++
		case ']', '}':
			if sp > 0 {
				sp--
			}
			key = false
			i++
		case '.':
			i++ // between the parts of a key, or inside a number
		default:
			if !key {
				i++ // a number, boolean or date
				continue
			}
			start := i
			for i < len(doc) && isBare(doc[i]) {
				i++
			}
			if err := part(i - start); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// header reads the table header at doc[i] ('['): its parts name tables
// at levels 1, 2, ... It returns the offset after the parts (the closing
// brackets are left to the caller) and the table it opens (level 0 when
// it names none).
func header[Doc ~string | ~[]byte](doc Doc, i, line int, total *int, maxKeyPaths int) (int, container, error) {
	i++
	if i < len(doc) && doc[i] == '[' {
		i++
	}
	var t container
	for {
		for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t') {
			i++
		}
		start := i
		switch {
		case i < len(doc) && (doc[i] == '"' || doc[i] == '\''):
			end, lines := skipString(doc, i)
			if lines > 0 { // not a key: the decoder reports it
				return i, t, nil
			}
			i = end
		default:
			for i < len(doc) && isBare(doc[i]) {
				i++
			}
		}
		if i == start {
			return i, t, nil
		}
		if t.level++; t.level > MaxDepth {
			return i, t, &Error{Line: line, Msg: deeperMsg}
		}
		t.path += levelCost + i - start
		if *total += entryCost + t.path; *total > maxKeyPaths {
			return i, t, &Error{Line: line, Msg: keyPathsMsg}
		}
		for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t') {
			i++
		}
		if i >= len(doc) || doc[i] != '.' {
			return i, t, nil
		}
		i++
	}
}

// isBare reports whether c may be part of a bare key. It accepts more
// than TOML does (any byte without a meaning of its own), so that a key
// the decoder would refuse still counts as one.
func isBare(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '#', '"', '\'', '.', '=', '[', ']', '{', '}', ',':
		return false
	}
	return true
}

// skipString passes over the string that starts at doc[i] (a quote) and
// returns the offset after it and how many line breaks it holds. A
// single-line string ends at a line break, where the decoder refuses it.
func skipString[Doc ~string | ~[]byte](doc Doc, i int) (end, lines int) {
	q := doc[i]
	if i+2 < len(doc) && doc[i+1] == q && doc[i+2] == q {
		// Multi-line: up to the next three quotes, which may be followed
		// by two more that belong to the string.
		for i += 3; i < len(doc); i++ {
			switch doc[i] {
			case '\n':
				lines++
			case '\\':
				if q == '"' && i+1 < len(doc) {
					i++
					if doc[i] == '\n' {
						lines++
					}
				}
			case q:
				if i+2 < len(doc) && doc[i+1] == q && doc[i+2] == q {
					i += 3
					for n := 0; n < 2 && i < len(doc) && doc[i] == q; n++ {
						i++
					}
					return i, lines
				}
			}
		}
		return i, lines
	}
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\n':
			return i, 0
		case '\\':
			if q == '"' && i+1 < len(doc) && doc[i+1] != '\n' {
				i++
			}
		case q:
			return i + 1, 0
		}
	}
	return i, 0
}

// JSON checks that no JSON value in data nests more than MaxDepth arrays
// and objects deep. encoding/json stops only at 10,000 levels, and every
// consumer of a decoded value (templates, encoders, the engine's copies)
// walks it recursively.
func JSON(data []byte) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			if depth++; depth > MaxDepth {
				return fmt.Errorf("JSON nesting deeper than %d (at byte %d)", MaxDepth, i)
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return nil
}
