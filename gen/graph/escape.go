package graph

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible makes user text safe to show in any format before that format's
// own escaping: control characters, invalid UTF-8 and the invisible
// formatting characters (bidirectional overrides, zero-width joiners)
// become a visible <U+XXXX>, so a hostile id cannot break a line or
// display as something it is not.
func Visible(s string) string {
	clean := true
	for _, r := range s {
		if !plainRune(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "<0x%02X>", s[i])
		case plainRune(r):
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "<U+%04X>", r)
		}
		i += size
	}
	return b.String()
}

func plainRune(r rune) bool {
	return (r == ' ' || unicode.IsGraphic(r)) && !unicode.Is(unicode.Cf, r)
}

// mermaidText escapes text for a double-quoted Mermaid label: a quote,
// and every character that starts markup, an entity, a comment or a
// directive (%%{...}%% is found anywhere in the text) or ends a label,
// becomes an entity code (#NNN;), so user text stays text.
func mermaidText(s string) string {
	s = Visible(s)
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(mermaidSpecial, r) {
			fmt.Fprintf(&b, "#%d;", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

const mermaidSpecial = "\"#%&<>;`|\\"

// dotText escapes text for a double-quoted DOT string. A backslash is
// doubled, so escape sequences such as \N or \l in user text stay
// literal.
func dotText(s string) string {
	s = Visible(s)
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// elementKey encodes a node key for an XML id or CSS class: letters,
// digits and '.' stay, every other byte becomes _XX. The encoding is
// injective and never contains '-', so "edge-" + from + "-" + to is
// unambiguous.
func elementKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String()
}

// NodeElementID is the SVG element id of the node with key: "node-"
// and the key, encoded.
func NodeElementID(key string) string { return "node-" + elementKey(key) }

// EdgeElementID is the SVG element id of the first edge from one node key
// to another; further edges between the same nodes get "-2", "-3".
func EdgeElementID(from, to string) string {
	return "edge-" + elementKey(from) + "-" + elementKey(to)
}
