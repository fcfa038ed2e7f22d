// Package rules holds the checks several capability families share that
// need packages a sealed binary of the core families must not link
// (net/url, regexp): only families that link them anyway, and the
// generator, import it.
package rules

import (
	"net/url"
	"regexp"
	"strings"
)

// HTTPURL reports whether s is an absolute http(s) URL with a host.
func HTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// HeaderName matches an HTTP field name (an RFC 9110 token).
var HeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

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

// SecretRef is a declared header value's {{secret:NAME}} placeholder
// (http_request headers, MCP url server headers).
var SecretRef = regexp.MustCompile(`\{\{\s*secret:([A-Za-z0-9_.-]+)\s*\}\}`)

// HeaderPart is one piece of a declared header value: literal Text, or,
// when Secret is set, the secret a placeholder names.
type HeaderPart struct{ Text, Secret string }

// SplitHeaderValue splits a declared header value into literal text and
// {{secret:NAME}} placeholders, in order; the value is resolved by
// concatenating the parts with each secret's value.
func SplitHeaderValue(val string) []HeaderPart {
	var parts []HeaderPart
	rest := val
	for {
		loc := SecretRef.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		if loc[0] > 0 {
			parts = append(parts, HeaderPart{Text: rest[:loc[0]]})
		}
		parts = append(parts, HeaderPart{Secret: rest[loc[2]:loc[3]]})
		rest = rest[loc[1]:]
	}
	if rest != "" {
		parts = append(parts, HeaderPart{Text: rest})
	}
	return parts
}
