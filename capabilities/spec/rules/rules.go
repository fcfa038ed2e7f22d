// Package rules holds the checks several capability families share that
// need packages a sealed binary of the core families must not link
// (net/url): only families that link them anyway, and the generator,
// import it. It matches by hand rather than with regexp, which would
// weigh on every binary of those families (the http family's serve
// binaries among them).
package rules

import (
	"net/url"
	"strings"
)

// HTTPURL reports whether s is an absolute http(s) URL with a host.
func HTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// IsHeaderName reports whether s is an HTTP field name (an RFC 9110
// token: one or more of !#$%&'*+-.^_`|~, digits and letters).
func IsHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// PatternHost is the literal host of a [policy.http] URL pattern ("" for
// "*" or a pattern without a literal host).
func PatternHost(pat string) string {
	u, err := url.Parse(strings.TrimRight(pat, "*"))
	if err != nil || u.Host == "" || strings.Contains(u.Host, "*") {
		return ""
	}
	return u.Hostname()
}

// Hostname is the host of URL s without its port ("" when s has none).
func Hostname(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// HeaderPart is one piece of a declared header value: literal Text, or,
// when Secret is set, the secret a {{secret:NAME}} placeholder names
// (http_request headers, MCP url server headers).
type HeaderPart struct{ Text, Secret string }

// SplitHeaderValue splits a declared header value into literal text and
// {{secret:NAME}} placeholders, in order; the value is resolved by
// concatenating the parts with each secret's value. A placeholder is
// "{{", optional white space, "secret:", a NAME of letters, digits and
// _.-, optional white space and "}}"; anything else is literal text.
func SplitHeaderValue(val string) []HeaderPart {
	var parts []HeaderPart
	text := 0 // start of the literal text not yet emitted
	for i := 0; i < len(val); i++ {
		name, end, ok := secretRef(val, i)
		if !ok {
			continue
		}
		if i > text {
			parts = append(parts, HeaderPart{Text: val[text:i]})
		}
		parts = append(parts, HeaderPart{Secret: name})
		text = end
		i = end - 1
	}
	if text < len(val) {
		parts = append(parts, HeaderPart{Text: val[text:]})
	}
	return parts
}

// secretRef matches a {{secret:NAME}} placeholder at val[i:], returning
// the NAME and the index just past the placeholder.
func secretRef(val string, i int) (name string, end int, ok bool) {
	rest, found := strings.CutPrefix(val[i:], "{{")
	if !found {
		return "", 0, false
	}
	rest, found = strings.CutPrefix(strings.TrimLeft(rest, spaces), "secret:")
	if !found {
		return "", 0, false
	}
	n := 0
	for n < len(rest) && (isAlnum(rest[n]) || strings.IndexByte("_.-", rest[n]) >= 0) {
		n++
	}
	if n == 0 {
		return "", 0, false
	}
	name = rest[:n]
	rest, found = strings.CutPrefix(strings.TrimLeft(rest[n:], spaces), "}}")
	if !found {
		return "", 0, false
	}
	return name, len(val) - len(rest), true
}

// spaces are the white space a placeholder may hold around its NAME.
const spaces = "\t\n\f\r "
