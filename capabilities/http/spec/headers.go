package spec

import (
	"fmt"
	"strings"
)

// MaxRouteHeaders bounds a route's headers list.
const MaxRouteHeaders = 32

// credentialHeaders never reach a run: they carry the caller's
// credentials, which the route's auth consumes, and a run's trigger is
// logged, recorded and checkpointed.
var credentialHeaders = map[string]bool{"authorization": true, "proxy-authorization": true, "cookie": true}

// CheckRouteHeaders checks a route's headers list (trigger.headers): at
// most MaxRouteHeaders valid header names, no duplicates (names compare
// case-insensitively) and no credential header. Both the generator and
// the server call it.
func CheckRouteHeaders(headers []string) []string {
	var out []string
	if len(headers) > MaxRouteHeaders {
		out = append(out, fmt.Sprintf("headers: %d names, at most %d", len(headers), MaxRouteHeaders))
	}
	seen := map[string]bool{}
	for _, h := range headers {
		lower := strings.ToLower(h)
		switch {
		case !validToken(h):
			out = append(out, fmt.Sprintf("headers: %q is not a header name", h))
		case credentialHeaders[lower]:
			out = append(out, fmt.Sprintf("headers: %s carries credentials and never reaches a run (the route's auth reads it)", h))
		case seen[lower]:
			out = append(out, fmt.Sprintf("headers: %s is listed twice", h))
		}
		seen[lower] = true
	}
	return out
}

// validToken: a header field name is an RFC 9110 token.
func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
