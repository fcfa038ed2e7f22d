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
	"github.com/kilnworks/kiln/runtime/confine"
)

// latencyBuckets are the upper bounds (seconds) of the request latency
// histogram.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics aggregates what /metrics exposes: run outcomes and the cost
// counters of every run the process fires (routes, triggers, resumed
// runs; fed by Host.OnReport), and per-route request
// counts and latency. Written in the Prometheus text format by hand: it
// is a few lines, and a client library would be the heaviest dependency
// of the family.
type metrics struct {
	workflow string

	mu      sync.Mutex
	runs    map[string]int64 // by top-level status
	cost    [len(costMetrics)]int64
	latency map[string]*histogram // by route
}

// histogram is one route's latency histogram and status code counts.
type histogram struct {
	codes  map[int]int64
	counts []int64 // per bucket, not cumulative
	sum    float64
	count  int64
}

func newMetrics(workflow string, routes []string) *metrics {
	m := &metrics{workflow: workflow, runs: map[string]int64{}, latency: map[string]*histogram{}}
	for _, s := range []string{runtime.StatusCompleted, runtime.StatusFailed, runtime.StatusTimedOut,
		runtime.StatusPaused, runtime.StatusErrored} {
		m.runs[s] = 0
	}
	for _, r := range routes {
		m.latency[r] = &histogram{codes: map[int]int64{}, counts: make([]int64, len(latencyBuckets))}
	}
	return m
}

// observeRun adds a finished run's outcome and cost.
func (m *metrics) observeRun(rep *runtime.Report) {
	var cost [len(costMetrics)]int64
	for i, c := range costMetrics {
		cost[i] = c.read(rep.Counters)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[rep.Outcome.Status]++
	for i, v := range cost {
		m.cost[i] += v
	}
}

// observeRequest records one answered request on a declared route.
func (m *metrics) observeRequest(route string, code int, d time.Duration) {
	s := d.Seconds()
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.latency[route]
	if h == nil {
		return
	}
	h.codes[code]++
	for i, le := range latencyBuckets {
		if s <= le {
			h.counts[i]++
			break
		}
	}
	h.sum += s
	h.count++
}

// costMetrics are the run cost counters exposed, summed over runs.
var costMetrics = [...]struct {
	name, help string
	read       func(*runtime.Counters) int64
}{
	{"kiln_node_executions_total", "Node executions (including retries and child workflows).",
		func(c *runtime.Counters) int64 { return c.NodeExecutions.Load() }},
	{"kiln_node_failures_total", "Node executions that ended in an error.",
		func(c *runtime.Counters) int64 { return c.NodeFailures.Load() }},
	{"kiln_policy_denials_total", "Policy denials.",
		func(c *runtime.Counters) int64 { return c.PolicyDenials.Load() }},
	{"kiln_llm_calls_total", "Intelligence calls.",
		func(c *runtime.Counters) int64 { return c.LLMCalls.Load() }},
	{"kiln_llm_tokens_total", "Intelligence tokens used (prompt + completion).",
		func(c *runtime.Counters) int64 { return c.LLMTokens.Load() }},
}

// write renders the exposition.
func (m *metrics) write(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	wf := `workflow="` + escapeLabel(m.workflow) + `"`

	header(&b, "kiln_runs_total", "counter", "Runs this process fired (HTTP routes, triggers, resumed runs), by final status.")
	for _, s := range runtime.SortedKeys(m.runs) {
		fmt.Fprintf(&b, "kiln_runs_total{%s,status=\"%s\"} %d\n", wf, escapeLabel(s), m.runs[s])
	}
	for i, c := range costMetrics {
		header(&b, c.name, "counter", c.help)
		fmt.Fprintf(&b, "%s{%s} %d\n", c.name, wf, m.cost[i])
	}

	header(&b, "kiln_http_requests_total", "counter", "Requests answered on declared routes, by route and status code.")
	for _, route := range runtime.SortedKeys(m.latency) {
		h := m.latency[route]
		codes := make([]int, 0, len(h.codes))
		for c := range h.codes {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		for _, c := range codes {
			fmt.Fprintf(&b, "kiln_http_requests_total{%s,route=\"%s\",code=\"%d\"} %d\n", wf, escapeLabel(route), c, h.codes[c])
		}
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

	// The Landlock confinement in force (docs/sandbox.md): 0 and ABI 0
	// before start-up applied it or when the process is not confined.
	confined, abi := 0, 0
	if r := confine.Current(); r != nil {
		abi = r.ABI
		if r.Confined {
			confined = 1
		}
	}
	header(&b, "kiln_sandbox_confined", "gauge", "1 when the process and its children are confined by Landlock, else 0.")
	fmt.Fprintf(&b, "kiln_sandbox_confined{%s} %d\n", wf, confined)
	header(&b, "kiln_sandbox_landlock_abi", "gauge", "The kernel's Landlock ABI version (0: none).")
	fmt.Fprintf(&b, "kiln_sandbox_landlock_abi{%s} %d\n", wf, abi)
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
