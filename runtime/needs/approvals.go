package needs

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kilnworks/kiln/runtime/nesting"
)

// decodeApprovals reads an approvals file. Every sealed binary links this
// package, and a general TOML library would add about 225 KiB to each
// (measured: it alone pushed the sealed hello past its 3.0 MiB budget),
// so this is a strict reader for exactly the approvals shape:
//
//	network      = ["host", ...]
//	capabilities = ["type", ...]
//	[[filesystem]]  path = "...", mode = "ro" | "rw"
//	[[oauth]]       provider = "...", scopes = ["...", ...]
//
// with comments, basic and literal strings, and arrays over several lines.
// Anything else (other keys, tables, value types, multi-line strings) is
// an error naming the line; approvals_test.go checks it agrees with
// BurntSushi/toml on the documents both accept.
func decodeApprovals(src string) (*Approvals, error) {
	// The shape nests one array deep; refuse deep documents the way
	// every TOML reader of kiln does, whatever this parser becomes.
	if err := nesting.TOML(src); err != nil {
		return nil, err
	}
	p := &approvalsParser{src: src, line: 1}
	a := &Approvals{}
	table := ""
	seen := map[string]bool{}
	for {
		p.skipBlank()
		if p.eof() {
			return a, nil
		}
		switch c := p.peek(); {
		case c == '\n':
			p.next()
			continue
		case c == '#':
			p.skipComment()
			continue
		case c == '[':
			if !strings.HasPrefix(p.src[p.pos:], "[[") {
				return nil, p.errorf("tables are not used in an approvals file (only [[filesystem]] and [[oauth]])")
			}
			p.pos += 2
			p.skipBlank()
			name := p.bareKey()
			p.skipBlank()
			if !strings.HasPrefix(p.src[p.pos:], "]]") {
				return nil, p.errorf("expected ]] after [[%s", name)
			}
			p.pos += 2
			switch name {
			case "filesystem":
				a.Filesystem = append(a.Filesystem, FilesystemApproval{})
			case "oauth":
				a.OAuth = append(a.OAuth, OAuthGrant{})
			default:
				return nil, p.errorf("unknown table [[%s]] (want [[filesystem]] or [[oauth]])", name)
			}
			table = name
			seen = map[string]bool{}
			if err := p.endOfLine(); err != nil {
				return nil, err
			}
			continue
		}
		key := p.bareKey()
		if key == "" {
			return nil, p.errorf("expected a key")
		}
		full := key
		if table != "" {
			full = table + "." + key
		}
		if seen[key] {
			return nil, p.errorf("key %q is defined twice", full)
		}
		seen[key] = true
		p.skipBlank()
		if p.eof() || p.peek() != '=' {
			return nil, p.errorf("expected = after %s", full)
		}
		p.next()
		p.skipBlank()
		var err error
		switch full {
		case "network":
			a.Network, err = p.stringArray(full)
		case "capabilities":
			a.Capabilities, err = p.stringArray(full)
		case "filesystem.path":
			a.Filesystem[len(a.Filesystem)-1].Path, err = p.stringValue(full)
		case "filesystem.mode":
			a.Filesystem[len(a.Filesystem)-1].Mode, err = p.stringValue(full)
		case "oauth.provider":
			a.OAuth[len(a.OAuth)-1].Provider, err = p.stringValue(full)
		case "oauth.scopes":
			a.OAuth[len(a.OAuth)-1].Scopes, err = p.stringArray(full)
		default:
			return nil, p.errorf("unknown key %q", full)
		}
		if err != nil {
			return nil, err
		}
		if err := p.endOfLine(); err != nil {
			return nil, err
		}
	}
}

type approvalsParser struct {
	src  string
	pos  int
	line int
}

func (p *approvalsParser) eof() bool  { return p.pos >= len(p.src) }
func (p *approvalsParser) peek() byte { return p.src[p.pos] }

func (p *approvalsParser) next() byte {
	c := p.src[p.pos]
	p.pos++
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *approvalsParser) errorf(format string, args ...any) error {
	return fmt.Errorf("line %d: %s", p.line, fmt.Sprintf(format, args...))
}

// skipBlank skips spaces, tabs and the CR of a CRLF line end.
func (p *approvalsParser) skipBlank() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t' || p.peek() == '\r') {
		p.pos++
	}
}

func (p *approvalsParser) skipComment() {
	for !p.eof() && p.peek() != '\n' {
		p.pos++
	}
}

// skipSpace skips blanks, newlines and comments (inside arrays).
func (p *approvalsParser) skipSpace() {
	for {
		p.skipBlank()
		switch {
		case p.eof():
			return
		case p.peek() == '\n':
			p.next()
		case p.peek() == '#':
			p.skipComment()
		default:
			return
		}
	}
}

func (p *approvalsParser) endOfLine() error {
	p.skipBlank()
	if p.eof() {
		return nil
	}
	switch p.peek() {
	case '\n':
		p.next()
		return nil
	case '#':
		p.skipComment()
		return nil
	}
	return p.errorf("unexpected %q after the value", p.peek())
}

func (p *approvalsParser) bareKey() string {
	start := p.pos
	for !p.eof() {
		c := p.peek()
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			p.pos++
			continue
		}
		break
	}
	return p.src[start:p.pos]
}

func (p *approvalsParser) stringArray(key string) ([]string, error) {
	if p.eof() || p.peek() != '[' {
		return nil, p.errorf("%s must be an array of strings", key)
	}
	p.next()
	out := []string{}
	for {
		p.skipSpace()
		if p.eof() {
			return nil, p.errorf("%s: unterminated array", key)
		}
		if p.peek() == ']' {
			p.next()
			return out, nil
		}
		s, err := p.stringValue(key)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		p.skipSpace()
		if p.eof() {
			return nil, p.errorf("%s: unterminated array", key)
		}
		switch p.peek() {
		case ',':
			p.next()
		case ']':
		default:
			return nil, p.errorf("%s: expected , or ] in the array", key)
		}
	}
}

func (p *approvalsParser) stringValue(key string) (string, error) {
	if p.eof() || (p.peek() != '"' && p.peek() != '\'') {
		return "", p.errorf("%s must be a string", key)
	}
	if strings.HasPrefix(p.src[p.pos:], `"""`) || strings.HasPrefix(p.src[p.pos:], `'''`) {
		return "", p.errorf("%s: multi-line strings are not supported in an approvals file", key)
	}
	quote := p.next()
	var b strings.Builder
	for {
		if p.eof() || p.peek() == '\n' {
			return "", p.errorf("%s: unterminated string", key)
		}
		c := p.next()
		switch {
		case c == quote:
			if !utf8.ValidString(b.String()) {
				return "", p.errorf("%s: string is not valid UTF-8", key)
			}
			return b.String(), nil
		case c == '\\' && quote == '"':
			if err := p.escape(&b, key); err != nil {
				return "", err
			}
		case c < 0x20 && c != '\t' || c == 0x7f:
			return "", p.errorf("%s: control character in a string", key)
		default:
			b.WriteByte(c)
		}
	}
}

// escape reads one escape of a basic string (after the backslash).
func (p *approvalsParser) escape(b *strings.Builder, key string) error {
	if p.eof() {
		return p.errorf("%s: unterminated string", key)
	}
	switch c := p.next(); c {
	case 'b':
		b.WriteByte('\b')
	case 't':
		b.WriteByte('\t')
	case 'n':
		b.WriteByte('\n')
	case 'f':
		b.WriteByte('\f')
	case 'r':
		b.WriteByte('\r')
	case '"', '\\':
		b.WriteByte(c)
	case 'u', 'U':
		n := 4
		if c == 'U' {
			n = 8
		}
		if p.pos+n > len(p.src) {
			return p.errorf("%s: short \\%c escape", key, c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || !utf8.ValidRune(rune(v)) {
			return p.errorf("%s: bad \\%c escape", key, c)
		}
		p.pos += n
		b.WriteRune(rune(v))
	default:
		return p.errorf("%s: unknown escape \\%c", key, c)
	}
	return nil
}
