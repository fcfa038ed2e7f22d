package http

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/runtime"
)

// latencyBuckets are the upper bounds (seconds) of the request latency
// histogram.
var latencyBuckets = metrics.DurationBuckets

// routeMetrics are the per-route request counts and latency. /metrics
// writes them after the process metrics (runs, nodes, triggers, build:
// package metrics), which every run of the process feeds, not only route
// runs.
type routeMetrics struct {
	process *metrics.Set

	mu      sync.Mutex
	latency map[string]*histogram // by route
	// replays and conflicts count, per route with an idempotency_key,
	// recorded replies sent again and 409s for a key in flight.
	replays, conflicts map[string]int64
}

// histogram is one route's latency histogram and status code counts.
type histogram struct {
	codes map[int]int64
	h     *metrics.Histogram
}

// newMetrics attaches the process metrics to h (if no other listener did)
// and adds the routes' series.
func newMetrics(h *runtime.Host, routes []string) *routeMetrics {
	m := &routeMetrics{process: metrics.Attach(h), latency: map[string]*histogram{},
		replays: map[string]int64{}, conflicts: map[string]int64{}}
	for _, r := range routes {
		m.latency[r] = &histogram{codes: map[int]int64{}, h: metrics.NewHistogram()}
	}
	return m
}

// observeRequest records one answered request on a declared route.
func (m *routeMetrics) observeRequest(route string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.latency[route]
	if h == nil {
		return
	}
	h.codes[code]++
	h.h.Observe(d.Seconds())
}

// keyed declares route's idempotency series (at 0 until they count).
func (m *routeMetrics) keyed(route string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replays[route], m.conflicts[route] = 0, 0
}

// observeIdempotency counts a replayed reply (replay) or a 409 for a key
// in flight on route.
func (m *routeMetrics) observeIdempotency(route string, replay bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if replay {
		m.replays[route]++
	} else {
		m.conflicts[route]++
	}
}

// write renders the exposition: the process metrics, then the routes'.
func (m *routeMetrics) write(w io.Writer, workflow string) error {
	if err := m.process.Write(w); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	wf := `workflow="` + metrics.Escape(workflow) + `"`

	metrics.Header(&b, "kiln_http_requests_total", "counter", "Requests answered on declared routes, by route and status code.")
	for _, route := range runtime.SortedKeys(m.latency) {
		h := m.latency[route]
		codes := make([]int, 0, len(h.codes))
		for c := range h.codes {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		for _, c := range codes {
			fmt.Fprintf(&b, "kiln_http_requests_total{%s,route=\"%s\",code=\"%d\"} %d\n", wf, metrics.Escape(route), c, h.codes[c])
		}
	}

	const hname = "kiln_http_request_duration_seconds"
	metrics.Header(&b, hname, "histogram", "Latency of requests on declared routes, from headers read to reply written.")
	for _, route := range runtime.SortedKeys(m.latency) {
		m.latency[route].h.Write(&b, hname, wf+`,route="`+metrics.Escape(route)+`"`)
	}
	metrics.Header(&b, "kiln_http_idempotency_replays_total", "counter", "Recorded replies sent again for a repeated idempotency key, by route.")
	for _, route := range runtime.SortedKeys(m.replays) {
		fmt.Fprintf(&b, "kiln_http_idempotency_replays_total{%s,route=\"%s\"} %d\n", wf, metrics.Escape(route), m.replays[route])
	}
	metrics.Header(&b, "kiln_http_idempotency_conflicts_total", "counter", "Requests refused with 409 because their idempotency key was in flight, by route.")
	for _, route := range runtime.SortedKeys(m.conflicts) {
		fmt.Fprintf(&b, "kiln_http_idempotency_conflicts_total{%s,route=\"%s\"} %d\n", wf, metrics.Escape(route), m.conflicts[route])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
