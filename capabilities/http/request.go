package http

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/kilnworks/kiln/runtime"
)

// RequestIDHeader carries the request id in and out (docs/serve.md).
const RequestIDHeader = "X-Request-Id"

// maxRequestID bounds an incoming request id.
const maxRequestID = 128

// requestID is the caller's X-Request-Id when it is 1..128 characters of
// [A-Za-z0-9._:-] (safe to log and echo), else a fresh random id (fresh
// true): an unusable id is replaced, never refused. A fresh id is also
// the run's execution id (one id to correlate the reply with the audit).
func requestID(r *http.Request) (id string, fresh bool) {
	if vs := r.Header[RequestIDHeader]; len(vs) > 0 && validRequestID(vs[0]) {
		return vs[0], false
	}
	return runtime.NewExecutionID(), true
}

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// noValues is trigger.query of a request without a query string and
// trigger.headers of a route that lists none (shared: run values are
// never changed in place).
var noValues = map[string]any{}

// queryOf is trigger.query: each query parameter's first value, by name.
// A query string that does not parse is an error (400), not half-read.
// Its size is bounded by the header limit (MaxHeaderBytes).
func queryOf(r *http.Request) (map[string]any, error) {
	if r.URL.RawQuery == "" {
		return noValues, nil
	}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	q := make(map[string]any, len(values))
	for k, vs := range values {
		q[k] = vs[0]
	}
	return q, nil
}

// headersOf is trigger.headers: only the headers the route lists, by
// lower-case name, repeated values joined with ", "; a listed header the
// request lacks is absent.
func headersOf(r *http.Request, listed []string) map[string]any {
	if len(listed) == 0 {
		return noValues
	}
	h := make(map[string]any, len(listed))
	for _, name := range listed {
		if vs := r.Header.Values(name); len(vs) > 0 {
			h[strings.ToLower(name)] = strings.Join(vs, ", ")
		}
	}
	return h
}
