package spec

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Route reply modes.
const (
	ReplySync  = "sync"  // the reply waits for the run (the default)
	ReplyAsync = "async" // 202 at once; GET /v1/runs/{id} tells how it went
)

// RoutePattern is the net/http ServeMux pattern a route is served under:
// "METHOD PATH", where PATH may hold wildcards ({id}, {rest...}). A path
// ending in "/" matches only itself ("{$}" is added): a route never
// catches a whole subtree unless it says so with {name...}.
func RoutePattern(method, path string) string {
	if strings.HasSuffix(path, "/") {
		path += "{$}"
	}
	return method + " " + path
}

// CheckRoutePath checks a route's path as a ServeMux pattern: it must
// parse (wildcards are whole segments with Go identifier names, each name
// once, {name...} and {$} only last) and, when it holds a wildcard, it
// must not match a path the runtime answers itself (IsReservedPath).
func CheckRoutePath(method, path string) []spec.Issue {
	var is spec.Issues
	if err := parsePattern(RoutePattern(method, path)); err != nil {
		is.Add("invalid_route_pattern", "path %q is not a valid route pattern: %v", path, err)
		return is
	}
	if !strings.Contains(path, "{") {
		return is
	}
	segs := patternSegments(RoutePattern(method, path))
	for _, p := range reservedExact {
		if matchesPath(segs, p) {
			is.Add("reserved_route_pattern", "path %q matches %s, which the runtime answers itself", path, p)
			return is
		}
	}
	for _, p := range reservedPrefixes {
		if matchesUnder(segs, p) {
			is.Add("reserved_route_pattern", "path %q matches paths under %s/, which the runtime answers itself", path, p)
			return is
		}
	}
	return is
}

// CheckRouteReply checks a route's reply mode and run retention.
func CheckRouteReply(r workflow.HTTPRoute) []spec.Issue {
	var is spec.Issues
	switch r.Reply {
	case "", ReplySync, ReplyAsync:
	default:
		is.Add("invalid_route_reply", "reply %q must be %q or %q", r.Reply, ReplySync, ReplyAsync)
	}
	if r.RunRetentionSecs != nil {
		if r.Reply != ReplyAsync {
			is.Add("invalid_route_reply", "run_retention_secs needs reply = %q", ReplyAsync)
		} else if *r.RunRetentionSecs < 1 {
			is.Add("invalid_route_reply", "run_retention_secs must be at least 1, got %d", *r.RunRetentionSecs)
		}
	}
	return is
}

// Conflict is a pair of routes net/http cannot serve together: neither
// pattern is more specific, yet some request matches both.
type Conflict struct {
	First, Second int // indexes into the routes, First < Second
	Detail        string
}

// RouteConflicts lists the conflicting pairs among routes whose patterns
// parse (ServeMux would panic on registering them).
func RouteConflicts(routes []workflow.HTTPRoute) []Conflict {
	var out []Conflict
	for j := range routes {
		pj := RoutePattern(routes[j].Method, routes[j].Path)
		if parsePattern(pj) != nil {
			continue
		}
		for i := 0; i < j; i++ {
			pi := RoutePattern(routes[i].Method, routes[i].Path)
			if pi == pj || parsePattern(pi) != nil {
				continue // an exact duplicate is duplicate_route
			}
			if err := register(pi, pj); err != nil {
				out = append(out, Conflict{First: i, Second: j, Detail: conflictDetail(err)})
			}
		}
	}
	return out
}

// conflictDetail keeps net/http's explanation of a conflict (e.g. "GET
// /a/{x} and GET /{y}/b both match some paths, like "/a/b". But neither
// is more specific than the other.") and drops the Go source positions
// of its first line.
func conflictDetail(err error) string {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) < 2 {
		return err.Error()
	}
	return strings.Join(lines[1:min(3, len(lines))], " ")
}

// parsePattern is net/http's own parse of a pattern.
func parsePattern(p string) error { return register(p) }

// register registers patterns on a fresh ServeMux, which panics on a
// pattern that does not parse or conflicts with one before it.
func register(patterns ...string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
			// "parsing "GET /a/{x": at offset 11: bad wildcard segment":
			// keep the reason (the offset counts the method too).
			if msg, ok := strings.CutPrefix(err.Error(), "parsing "); ok {
				if _, rest, ok := strings.Cut(msg, ": "); ok {
					if _, after, ok := strings.Cut(rest, ": "); ok && strings.HasPrefix(rest, "at offset ") {
						rest = after
					}
					err = fmt.Errorf("%s", rest)
				}
			}
		}
	}()
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, http.NotFoundHandler())
	}
	return nil
}

// A pattern segment: a literal (unescaped, as ServeMux compares it), a
// single wildcard {x}, a multi wildcard {x...} (name x) or the end marker
// {$}.
type segment struct {
	lit         string
	name        string
	wild, multi bool
	end         bool
}

// WildcardNames lists the names of the wildcards of a route path that
// CheckRoutePath accepted, in order ({$} is none).
func WildcardNames(path string) []string {
	var out []string
	for _, s := range patternSegments(RoutePattern("GET", path)) {
		if s.wild || s.multi {
			out = append(out, s.name)
		}
	}
	return out
}

// patternSegments splits a pattern that parses ("METHOD /a/{x}/b").
func patternSegments(pattern string) []segment {
	_, path, _ := strings.Cut(pattern, " ")
	var out []segment
	for _, s := range strings.Split(path[1:], "/") {
		switch {
		case s == "{$}":
			out = append(out, segment{end: true})
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "...}"):
			out = append(out, segment{name: s[1 : len(s)-4], multi: true})
		case strings.HasPrefix(s, "{"):
			out = append(out, segment{name: s[1 : len(s)-1], wild: true})
		default:
			lit, err := url.PathUnescape(s)
			if err != nil {
				lit = s
			}
			out = append(out, segment{lit: lit})
		}
	}
	return out
}

// matchesPath reports whether the segments match path, a clean path with
// no empty segment and no trailing slash.
func matchesPath(segs []segment, path string) bool {
	parts := strings.Split(path[1:], "/")
	for i, s := range segs {
		switch {
		case s.multi:
			return i < len(parts) // {x...} takes the rest (a non-empty rest here)
		case s.end || i >= len(parts):
			return false // {$} needs a trailing slash; a reserved path has none
		case !s.wild && s.lit != parts[i]:
			return false
		}
	}
	return len(segs) == len(parts)
}

// matchesUnder reports whether the segments match some path under
// prefix + "/" (that path itself included).
func matchesUnder(segs []segment, prefix string) bool {
	parts := strings.Split(prefix[1:], "/")
	for i, p := range parts {
		if i >= len(segs) {
			return false
		}
		s := segs[i]
		switch {
		case s.multi:
			return true
		case s.end:
			return false
		case !s.wild && s.lit != p:
			return false
		}
	}
	// Anything after the prefix's segments can be met by some path: a
	// literal by itself, a wildcard by any name, {$} by prefix + "/".
	return len(segs) > len(parts)
}
