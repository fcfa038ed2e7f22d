package spec

import (
	"strings"
	"testing"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// TestCheckRoutePath: a path must parse as a ServeMux pattern, and a
// pattern with wildcards must not match any path the runtime answers.
func TestCheckRoutePath(t *testing.T) {
	for path, want := range map[string]string{
		"/hook":                    "",
		"/orders/{id}":             "",
		"/orders/{id}/items/{n}":   "",
		"/files/{rest...}":         "",
		"/a/":                      "",
		"/.well-known/acme/{t}":    "",
		"/v1/other/{id}":           "",
		"/v1/runs2/{id}":           "",
		"/orders/{id}/x/{id}":      "invalid_route_pattern",
		"/orders/{id":              "invalid_route_pattern",
		"/orders/x{id}":            "invalid_route_pattern",
		"/orders/{1d}":             "invalid_route_pattern",
		"/a/{rest...}/b":           "invalid_route_pattern",
		"/a/{$}/b":                 "invalid_route_pattern",
		"/{page}":                  "reserved_route_pattern", // /healthz
		"/{all...}":                "reserved_route_pattern",
		"/.well-known/{name}":      "reserved_route_pattern", // /.well-known/kiln
		"/v1/runs/{id}":            "reserved_route_pattern",
		"/v1/{kind}/{id}":          "reserved_route_pattern",
		"/{v}/runs/{id}/{$}":       "reserved_route_pattern", // /v1/runs/x/
		"/v1/agents/{name}/detail": "reserved_route_pattern",
		"/v1/{x...}":               "reserved_route_pattern",
		"/{a}/{b}":                 "reserved_route_pattern", // /v1/runs itself
	} {
		is := CheckRoutePath("GET", path)
		got := ""
		if len(is) > 0 {
			got = is[0].Code
		}
		if got != want || len(is) > 1 {
			t.Errorf("%s: %v, want %q", path, is, want)
		}
	}
}

// TestWildcardNames: the names trigger.path is keyed by, in order; {$}
// names none, and a name is any Go identifier ServeMux accepts.
func TestWildcardNames(t *testing.T) {
	for path, want := range map[string]string{
		"/hook":                  "",
		"/orders/{id}":           "id",
		"/files/{dir}/{rest...}": "dir rest",
		"/a/{x}/b/{$}":           "x",
		"/a/{_b2}/{café}":        "_b2 café",
	} {
		if is := CheckRoutePath("GET", path); len(is) > 0 {
			t.Fatalf("%s: %v", path, is)
		}
		if got := strings.Join(WildcardNames(path), " "); got != want {
			t.Errorf("WildcardNames(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestRoutePatternExact: a path ending in "/" serves only itself, not the
// subtree ServeMux would give it.
func TestRoutePatternExact(t *testing.T) {
	if got := RoutePattern("POST", "/a/"); got != "POST /a/{$}" {
		t.Fatalf("RoutePattern = %q", got)
	}
	if got := RoutePattern("POST", "/a/{id}"); got != "POST /a/{id}" {
		t.Fatalf("RoutePattern = %q", got)
	}
}

// TestRouteConflicts: routes ServeMux could not register together are
// found (with net/http's reason), and routes it can are not.
func TestRouteConflicts(t *testing.T) {
	r := func(m, p string) workflow.HTTPRoute { return workflow.HTTPRoute{Method: m, Path: p} }
	routes := []workflow.HTTPRoute{
		r("GET", "/orders/{id}"),
		r("GET", "/orders/{oid}"), // same requests, other name: conflict with 0
		r("POST", "/orders/{x}"),  // another method: fine
		r("GET", "/orders/new"),   // more specific than 0: fine
		r("GET", "/{kind}/new"),   // neither more specific than 0: conflict
		r("GET", "/{bad"),         // does not parse: invalid_route_pattern's business
	}
	got := RouteConflicts(routes)
	if len(got) != 3 {
		t.Fatalf("conflicts %+v", got)
	}
	want := [][2]int{{0, 1}, {0, 4}, {1, 4}}
	for i, c := range got {
		if [2]int{c.First, c.Second} != want[i] {
			t.Errorf("conflict %d = %d,%d, want %v", i, c.First, c.Second, want[i])
		}
		if strings.Contains(c.Detail, ".go:") || !strings.Contains(c.Detail, "match") {
			t.Errorf("detail %q", c.Detail)
		}
	}
}

// TestCheckRouteReply: sync or async only; a retention needs async and
// at least a second.
func TestCheckRouteReply(t *testing.T) {
	one, zero := 1, 0
	for _, tc := range []struct {
		r  workflow.HTTPRoute
		ok bool
	}{
		{workflow.HTTPRoute{}, true},
		{workflow.HTTPRoute{Reply: "sync"}, true},
		{workflow.HTTPRoute{Reply: "async", RunRetentionSecs: &one}, true},
		{workflow.HTTPRoute{Reply: "Async"}, false},
		{workflow.HTTPRoute{Reply: "sync", RunRetentionSecs: &one}, false},
		{workflow.HTTPRoute{Reply: "async", RunRetentionSecs: &zero}, false},
	} {
		is := CheckRouteReply(tc.r)
		if (len(is) == 0) != tc.ok || (len(is) > 0 && is[0].Code != "invalid_route_reply") {
			t.Errorf("%+v: %v", tc.r, is)
		}
	}
}
