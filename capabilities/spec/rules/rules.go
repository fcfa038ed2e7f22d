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
