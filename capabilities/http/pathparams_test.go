package http

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/kilnworks/kiln/gen"
)

// paramsWF serves the echo node on several patterned routes.
const paramsWF = `
name = "hooks"
[[start_nodes]]
name = "main"
source = "http"
entry_node = "n"
[[nodes]]
id = "n"
type = "httptest_node"
key = "echo"
[[http_routes]]
method = "POST"
path = "/orders/{id}"
start_node = "main"
[[http_routes]]
method = "POST"
path = "/orders/new"
start_node = "main"
[[http_routes]]
method = "GET"
path = "/files/{dir}/{rest...}"
start_node = "main"
[[http_routes]]
method = "POST"
path = "/exact/"
start_node = "main"
`

// pathOf is trigger.path as the run saw it, as JSON.
func pathOf(t *testing.T, r resp) string {
	t.Helper()
	var out struct {
		FinalValue struct {
			Trigger map[string]any `json:"trigger"`
		} `json:"final_value"`
	}
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	b, _ := json.Marshal(out.FinalValue.Trigger["path"])
	return string(b)
}

// TestPathParameters: on a real loopback server a route's wildcards land
// in trigger.path, unescaped, and the body cannot spoof them; a more
// specific route wins; a path ending in / matches only itself; a path no
// route matches is 404 and a wrong method 405 with the methods that match.
func TestPathParameters(t *testing.T) {
	ts := start(t, paramsWF, setup{})
	spoof := `{"path":{"id":"spoofed","extra":"spoofed"}}`
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/orders/42", spoof, `{"id":"42"}`},
		{"POST", "/orders/a%2Fb%20c", spoof, `{"id":"a/b c"}`},
		{"POST", "/orders/caf%C3%A9", `{}`, `{"id":"café"}`},
		{"POST", "/orders/new", spoof, `{}`}, // more specific than /orders/{id}; no wildcard, and still not spoofable
		{"GET", "/files/docs/a/b%2Fc/d.txt", "", `{"dir":"docs","rest":"a/b/c/d.txt"}`},
		{"GET", "/files/docs/", "", `{"dir":"docs","rest":""}`},
		{"POST", "/exact/", spoof, `{}`},
	} {
		r := ts.do(t, tc.method, tc.path, tc.body, "Content-Type", "application/json").expect(t, 200)
		if got := pathOf(t, r); got != tc.want {
			t.Errorf("%s %s: trigger.path = %s, want %s", tc.method, tc.path, got, tc.want)
		}
		if strings.Contains(r.body, "spoofed") {
			t.Errorf("%s %s: the body's path reached the run: %s", tc.method, tc.path, r.body)
		}
	}
	for _, tc := range []struct {
		method, path string
		code         int
		allow        string
	}{
		{"POST", "/orders/42/more", 404, ""},
		{"POST", "/exact/more", 404, ""},
		{"POST", "/orders/", 404, ""},
		{"POST", "//orders/42", 404, ""}, // not clean: no redirect, no route
		{"PUT", "/orders/42", 405, "POST"},
		{"HEAD", "/files/a/b", 405, "GET"}, // a GET route runs for GET only
		{"DELETE", "/files/a/b", 405, "GET"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"POST", "/v1/runs/abc", 405, "GET, HEAD"},
	} {
		r := ts.do(t, tc.method, tc.path, `{}`).expect(t, tc.code)
		if r.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, r.header.Get("Allow"), tc.allow)
		}
	}
	// As ServeMux does, /exact is redirected to the declared /exact/.
	ts.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if r := ts.do(t, "POST", "/exact?x=1", `{}`).expect(t, 307); r.header.Get("Location") != "/exact/?x=1" {
		t.Errorf("redirect to %q", r.header.Get("Location"))
	}
}

// TestRoutePatternsRefused: a pattern that does not parse, that matches
// a runtime path, or that conflicts with another route is refused by kiln
// check (with the route and the reason) and by the server at start-up
// (ServeMux would panic on a conflict).
func TestRoutePatternsRefused(t *testing.T) {
	route := func(method, path string) string {
		return "[[http_routes]]\nmethod = \"" + method + "\"\npath = \"" + path + "\"\nstart_node = \"main\"\n"
	}
	for _, tc := range []struct {
		routes, code, detail string
	}{
		{route("POST", "/orders/{id}/x/{id}"), "invalid_route_pattern", `duplicate wildcard name "id"`},
		{route("POST", "/orders/{id"), "invalid_route_pattern", "route POST /orders/{id"},
		{route("GET", "/{page}"), "reserved_route_pattern", "/healthz"},
		{route("GET", "/{v}/runs/{id}"), "reserved_route_pattern", "/v1/runs"},
		{route("POST", "/orders/{id}") + route("POST", "/orders/{oid}"), "conflicting_routes", "http_routes[0] (POST /orders/{id}) and http_routes[1] (POST /orders/{oid})"},
		{route("POST", "/orders/{id}") + route("POST", "/{kind}/new"), "conflicting_routes", "neither is more specific"},
	} {
		src := paramsWF[:strings.Index(paramsWF, "[[http_routes]]")] + tc.routes
		wf, err := gen.Decode("workflow.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: decode: %v", tc.code, err)
		}
		err = gen.Validate(wf)
		var ve *gen.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: kiln check accepted it: %v", tc.code, err)
		}
		var codes []string
		for _, is := range ve.Issues {
			if is.Code == "unknown_node_type" { // the test node kind is not in the catalog
				continue
			}
			codes = append(codes, is.Code)
			if is.Code == tc.code && !strings.Contains(is.Message, tc.detail) {
				t.Errorf("%s: message %q lacks %q", tc.code, is.Message, tc.detail)
			}
		}
		if !slices.Equal(codes, []string{tc.code}) {
			t.Errorf("%s: codes %v", tc.code, codes)
		}
		h := newHost(t, src, setup{})
		if _, err := New(h, Config{}); err == nil {
			t.Errorf("%s: the server started", tc.code)
		}
	}
}
