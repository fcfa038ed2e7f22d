package http

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnworks/kiln/runtime"
)

// latencyBuckets are the upper bounds (seconds) of the request latency
// histogram.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics aggregates what /metrics exposes: run outcomes and the cost
// counters of every run this server started, and per-route request
// counts and latency. Written in the Prometheus text format by hand: it
// is a few lines, and a client library would be the heaviest dependency
// of the family.
type metrics struct {
	workflow string

	mu       sync.Mutex
	runs     map[string]int64 // by top-level status
	cost     map[string]int64 // summed Counters.Snapshot()
	requests map[[2]string]int64
	latency  map[string]*histogram // by route
}

type histogram struct {
	counts []int64 // per bucket, not cumulative
	sum    float64
	count  int64
}

func newMetrics(workflow string, routes []string) *metrics {
	m := &metrics{workflow: workflow, runs: map[string]int64{}, cost: map[string]int64{},
		requests: map[[2]string]int64{}, latency: map[string]*histogram{}}
	for _, s := range []string{runtime.StatusCompleted, runtime.StatusFailed, runtime.StatusTimedOut,
		runtime.StatusPaused, runtime.StatusErrored} {
		m.runs[s] = 0
	}
	for k := range (&runtime.Counters{}).Snapshot() {
		m.cost[k] = 0
	}
	for _, r := range routes {
		m.latency[r] = &histogram{counts: make([]int64, len(latencyBuckets))}
	}
	return m
}

// observeRun adds a finished run's outcome and cost.
func (m *metrics) observeRun(rep *runtime.Report) {
	snap := rep.Counters.Snapshot()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[rep.Outcome.Status]++
	for k, v := range snap {
		m.cost[k] += v
	}
}

// observeRequest records one answered request on a declared route.
func (m *metrics) observeRequest(route string, code int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[2]string{route, strconv.Itoa(code)}]++
	h := m.latency[route]
	if h == nil {
		return
	}
	s := d.Seconds()
	for i, le := range latencyBuckets {
		if s <= le {
			h.counts[i]++
			break
		}
	}
	h.sum += s
	h.count++
}

// costMetrics maps Counters.Snapshot keys to exposed counter names.
var costMetrics = []struct{ key, name, help string }{
	{"node_executions", "kiln_node_executions_total", "Node executions (including retries and child workflows)."},
	{"node_failures", "kiln_node_failures_total", "Node executions that ended in an error."},
	{"policy_denials", "kiln_policy_denials_total", "Policy denials."},
	{"llm_calls", "kiln_llm_calls_total", "Intelligence calls."},
	{"llm_tokens", "kiln_llm_tokens_total", "Intelligence tokens used (prompt + completion)."},
}

// write renders the exposition.
func (m *metrics) write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	wf := `workflow="` + escapeLabel(m.workflow) + `"`

	header(&b, "kiln_runs_total", "counter", "Runs started by HTTP routes, by final status.")
	for _, s := range runtime.SortedKeys(m.runs) {
		fmt.Fprintf(&b, "kiln_runs_total{%s,status=\"%s\"} %d\n", wf, escapeLabel(s), m.runs[s])
	}
	for _, c := range costMetrics {
		header(&b, c.name, "counter", c.help)
		fmt.Fprintf(&b, "%s{%s} %d\n", c.name, wf, m.cost[c.key])
	}

	header(&b, "kiln_http_requests_total", "counter", "Requests answered on declared routes, by route and status code.")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "kiln_http_requests_total{%s,route=\"%s\",code=\"%s\"} %d\n", wf, escapeLabel(k[0]), k[1], m.requests[k])
	}

	const hname = "kiln_http_request_duration_seconds"
	header(&b, hname, "histogram", "Latency of requests on declared routes, from headers read to reply written.")
	for _, route := range runtime.SortedKeys(m.latency) {
		h := m.latency[route]
		labels := wf + `,route="` + escapeLabel(route) + `"`
		var cum int64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "%s_bucket{%s,le=\"%s\"} %d\n", hname, labels, strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d\n", hname, labels, h.count)
		fmt.Fprintf(&b, "%s_sum{%s} %s\n", hname, labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(&b, "%s_count{%s} %d\n", hname, labels, h.count)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func header(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// escapeLabel escapes a label value per the text format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
