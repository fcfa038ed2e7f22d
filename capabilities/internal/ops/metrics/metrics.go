// Package metrics holds what a long-running kiln process counts about
// itself (runs, node attempts, trigger fires, build and sandbox facts) and
// writes it in the Prometheus text exposition format (docs/operations.md
// lists every series). It links no HTTP server: the trigger loops count
// through it, and the ops listener and the http family serve it.
//
// The exposition is written by hand: it is a few lines, and a client
// library would be the heaviest dependency of every serving binary.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/confine"
	"github.com/kilnworks/kiln/runtime/discovery"
	"github.com/kilnworks/kiln/runtime/manifest"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DurationBuckets are the upper bounds (seconds) of the duration
// histograms: node attempts and HTTP requests.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Set is one host's metrics. Every method is safe for concurrent use and
// a nil *Set counts nothing, so callers need no "is it attached" check.
type Set struct {
	workflow, version, tables string

	mu       sync.Mutex
	runs     map[runKey]int64
	active   int64
	cost     [len(costMetrics)]int64
	nodes    map[string]*Histogram // node attempt duration by kind
	retries  map[string]int64      // attempts after the first, by kind
	denials  map[string]int64      // policy denials, by capability family
	llm      map[string]*Histogram // intelligence request duration, by backend
	tokens   map[tokenKey]int64
	mcpUp    func() map[string]bool // nil: no MCP servers
	restarts map[string]int64       // MCP server restarts, by server
	fires    map[string]int64       // trigger runs started, by trigger
	skipped  map[string]int64       // trigger ticks dropped, by trigger
	triggers map[string]bool        // every trigger seen, so both series exist

	endTop func(*runtime.Outcome) // a top-level run's end, built once
}

type runKey struct{ start, status string }

type tokenKey struct{ backend, typ string }

type setKey struct{}

// Attach returns the host's Set, creating it on first use. Creating it
// registers it for the report of every run the host fires and wraps the
// engine's observer (for active runs and node attempts), so it must be
// called before the host starts runs: from an extension's Listeners.
func Attach(h *runtime.Host) *Set {
	if s := Of(h); s != nil {
		return s
	}
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	s := newSet(h)
	v, loaded := h.Engine.Services.Values.LoadOrStore(setKey{}, s)
	if loaded {
		return v.(*Set)
	}
	h.OnReport(s.observeRun)
	h.Engine.Observer = observer{next: h.Engine.Observer, set: s}
	return s
}

// Of returns the host's Set, or nil when none is attached (one-shot mode).
func Of(h *runtime.Host) *Set {
	if h == nil {
		return nil
	}
	return OfEngine(h.Engine)
}

// OfEngine is Of for a handler, which sees the run's engine.
func OfEngine(e *runtime.Engine) *Set {
	if e == nil || e.Services == nil {
		return nil
	}
	if v, ok := e.Services.Values.Load(setKey{}); ok {
		return v.(*Set)
	}
	return nil
}

func newSet(h *runtime.Host) *Set {
	s := &Set{runs: map[runKey]int64{}, nodes: map[string]*Histogram{}, retries: map[string]int64{}, denials: map[string]int64{},
		llm: map[string]*Histogram{}, tokens: map[tokenKey]int64{}, restarts: map[string]int64{},
		fires: map[string]int64{}, skipped: map[string]int64{}, triggers: map[string]bool{}}
	s.endTop = func(*runtime.Outcome) { s.runStarted(-1) }
	if h.Program != nil && h.Program.Workflow != nil {
		wf := h.Program.Workflow
		s.workflow = wf.Name
		if d, err := manifest.TablesDigest(wf); err == nil {
			s.tables = d
		}
		for _, n := range wf.Nodes {
			s.nodes[n.Type] = NewHistogram()
			s.retries[n.Type] = 0
			if k, ok := runtime.LookupNode(n.Type); ok && k.SideEffect {
				s.denials[k.Family] = 0
			}
		}
		if wf.Intelligence != nil {
			for _, b := range wf.Intelligence.Backends {
				s.llm[b.Name] = NewHistogram()
			}
		}
	}
	if self, ok := discovery.Attached(h); ok {
		s.version = self.Version
	}
	return s
}

// TriggerFired counts a run started by trigger name.
func (s *Set) TriggerFired(name string) { s.trigger(name, false) }

// TriggerSkipped counts a tick of trigger name dropped because the
// previous run was still in flight.
func (s *Set) TriggerSkipped(name string) { s.trigger(name, true) }

func (s *Set) trigger(name string, skipped bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.triggers[name] = true
	if skipped {
		s.skipped[name]++
	} else {
		s.fires[name]++
	}
}

// LLMRequest counts one intelligence request to backend ("" is the
// default backend) that took d and, when it answered, the tokens it
// reported.
func (s *Set) LLMRequest(backend string, d time.Duration, prompt, completion int64) {
	if s == nil {
		return
	}
	if backend == "" {
		backend = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.llm[backend]
	if h == nil {
		h = NewHistogram()
		s.llm[backend] = h
	}
	h.observe(d.Seconds())
	s.tokens[tokenKey{backend, "prompt"}] += prompt
	s.tokens[tokenKey{backend, "completion"}] += completion
}

// MCPServers makes the exposition report each MCP server's state, read
// from up at every scrape.
func (s *Set) MCPServers(up func() map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcpUp = up
}

// MCPRestarted counts a restart of an MCP server that died.
func (s *Set) MCPRestarted(server string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarts[server]++
}

// observeRun adds a finished top-level run's outcome and cost.
func (s *Set) observeRun(rep *runtime.Report) {
	var cost [len(costMetrics)]int64
	for i, c := range costMetrics {
		cost[i] = c.read(rep.Counters)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[runKey{rep.StartNode, rep.Outcome.Status}]++
	for i, v := range cost {
		s.cost[i] += v
	}
}

func (s *Set) runStarted(delta int64) {
	s.mu.Lock()
	s.active += delta
	s.mu.Unlock()
}

func (s *Set) nodeDone(kind string, attempt int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.nodes[kind]
	if h == nil { // a child workflow's kind
		h = NewHistogram()
		s.nodes[kind] = h
	}
	h.observe(d.Seconds())
	if attempt > 1 {
		s.retries[kind]++
	}
}

// Denied implements runtime.DenialObserver: a denial counts under the
// family of the denied node kind, or, for a kind no family registers (an
// agent_loop tool), under the denied capability's prefix (fs, http, ...).
func (o observer) Denied(r *runtime.Run, kind string, err error) {
	family := "unknown"
	if k, ok := runtime.LookupNode(kind); ok && k.Family != "" {
		family = k.Family
	} else if d := (*policy.Denial)(nil); errors.As(err, &d) && d.What != "" {
		family, _, _ = strings.Cut(d.What, ".")
	}
	o.set.mu.Lock()
	o.set.denials[family]++
	o.set.mu.Unlock()
	if next, ok := o.next.(runtime.DenialObserver); ok {
		next.Denied(r, kind, err)
	}
}

// observer counts active top-level runs and times every node attempt,
// then hands on to the observer it wraps (otel, tapes).
type observer struct {
	next runtime.Observer
	set  *Set
}

func (o observer) StartRun(ctx context.Context, r *runtime.Run) (context.Context, func(*runtime.Outcome)) {
	if o.next == nil { // no closure per run
		if r.Depth != 0 {
			return ctx, noEnd
		}
		o.set.runStarted(1)
		return ctx, o.set.endTop
	}
	var end func(*runtime.Outcome)
	if o.next != nil {
		ctx, end = o.next.StartRun(ctx, r)
	}
	top := r.Depth == 0
	if top {
		o.set.runStarted(1)
	}
	return ctx, func(out *runtime.Outcome) {
		if top {
			o.set.runStarted(-1)
		}
		if end != nil {
			end(out)
		}
	}
}

func (o observer) StartNode(ctx context.Context, r *runtime.Run, n *workflow.Node, attempt int) (context.Context, func(runtime.Result, error)) {
	var end func(runtime.Result, error)
	if o.next != nil {
		ctx, end = o.next.StartNode(ctx, r, n, attempt)
	}
	start := time.Now()
	return ctx, func(res runtime.Result, err error) {
		o.set.nodeDone(n.Type, attempt, time.Since(start))
		if end != nil {
			end(res, err)
		}
	}
}

func noEnd(*runtime.Outcome) {}

// costMetrics are the run cost counters exposed, summed over runs.
var costMetrics = [...]struct {
	name, help string
	read       func(*runtime.Counters) int64
}{
	{"kiln_node_executions_total", "Node executions (including retries and child workflows).",
		func(c *runtime.Counters) int64 { return c.NodeExecutions.Load() }},
	{"kiln_node_failures_total", "Node executions that ended in an error.",
		func(c *runtime.Counters) int64 { return c.NodeFailures.Load() }},
	{"kiln_llm_calls_total", "Intelligence calls.",
		func(c *runtime.Counters) int64 { return c.LLMCalls.Load() }},
}

// Write renders the process metrics (without the http family's request
// series, which its server appends).
func (s *Set) Write(w io.Writer) error {
	var b strings.Builder
	s.mu.Lock()
	wf := `workflow="` + Escape(s.workflow) + `"`

	Header(&b, "kiln_build_info", "gauge", "Always 1; the labels name the build: kiln version, workflow and tables_sha256 (the manifest's digest of the compiled-in workflow).")
	fmt.Fprintf(&b, "kiln_build_info{%s,version=\"%s\",tables_sha256=\"%s\"} 1\n", wf, Escape(s.version), Escape(s.tables))

	Header(&b, "kiln_runs_total", "counter", "Runs this process fired (HTTP routes, triggers, resumed runs), by start node and final status.")
	keys := make([]runKey, 0, len(s.runs))
	for k := range s.runs {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "kiln_runs_total{%s,start_node=\"%s\",status=\"%s\"} %d\n", wf, Escape(k.start), Escape(k.status), s.runs[k])
	}
	Header(&b, "kiln_runs_active", "gauge", "Top-level runs in flight.")
	fmt.Fprintf(&b, "kiln_runs_active{%s} %d\n", wf, s.active)
	for i, c := range costMetrics {
		Header(&b, c.name, "counter", c.help)
		fmt.Fprintf(&b, "%s{%s} %d\n", c.name, wf, s.cost[i])
	}

	const nd = "kiln_node_duration_seconds"
	Header(&b, nd, "histogram", "Duration of node attempts (retries and child workflows' nodes included), by node kind.")
	for _, kind := range runtime.SortedKeys(s.nodes) {
		s.nodes[kind].Write(&b, nd, wf+`,kind="`+Escape(kind)+`"`)
	}
	Header(&b, "kiln_node_retries_total", "counter", "Node attempts after the first (retries), by node kind.")
	for _, kind := range runtime.SortedKeys(s.retries) {
		fmt.Fprintf(&b, "kiln_node_retries_total{%s,kind=\"%s\"} %d\n", wf, Escape(kind), s.retries[kind])
	}

	Header(&b, "kiln_policy_denials_total", "counter", "Policy denials, by capability family of the denied node kind.")
	for _, f := range runtime.SortedKeys(s.denials) {
		fmt.Fprintf(&b, "kiln_policy_denials_total{%s,family=\"%s\"} %d\n", wf, Escape(f), s.denials[f])
	}

	const ld = "kiln_llm_request_duration_seconds"
	Header(&b, ld, "histogram", "Duration of intelligence requests (failed ones included), by backend.")
	for _, be := range runtime.SortedKeys(s.llm) {
		s.llm[be].Write(&b, ld, wf+`,backend="`+Escape(be)+`"`)
	}
	Header(&b, "kiln_llm_tokens_total", "counter", "Intelligence tokens the backends reported, by backend and type (prompt, completion).")
	for _, be := range runtime.SortedKeys(s.llm) {
		for _, typ := range []string{"completion", "prompt"} {
			fmt.Fprintf(&b, "kiln_llm_tokens_total{%s,backend=\"%s\",type=\"%s\"} %d\n", wf, Escape(be), typ, s.tokens[tokenKey{be, typ}])
		}
	}

	if s.mcpUp != nil {
		up := s.mcpUp()
		Header(&b, "kiln_mcp_server_up", "gauge", "1 while the MCP server's connection is alive, else 0.")
		for _, name := range runtime.SortedKeys(up) {
			v := 0
			if up[name] {
				v = 1
			}
			fmt.Fprintf(&b, "kiln_mcp_server_up{%s,server=\"%s\"} %d\n", wf, Escape(name), v)
		}
		Header(&b, "kiln_mcp_server_restarts_total", "counter", "Restarts of MCP servers that died, by server.")
		for _, name := range runtime.SortedKeys(up) {
			fmt.Fprintf(&b, "kiln_mcp_server_restarts_total{%s,server=\"%s\"} %d\n", wf, Escape(name), s.restarts[name])
		}
	}

	Header(&b, "kiln_trigger_fires_total", "counter", "Runs started by a trigger, by trigger.")
	for _, t := range runtime.SortedKeys(s.triggers) {
		fmt.Fprintf(&b, "kiln_trigger_fires_total{%s,trigger=\"%s\"} %d\n", wf, Escape(t), s.fires[t])
	}
	Header(&b, "kiln_trigger_skipped_total", "counter", "Trigger ticks dropped because the trigger's previous run was still in flight.")
	for _, t := range runtime.SortedKeys(s.triggers) {
		fmt.Fprintf(&b, "kiln_trigger_skipped_total{%s,trigger=\"%s\"} %d\n", wf, Escape(t), s.skipped[t])
	}
	s.mu.Unlock()

	// The Landlock confinement in force (docs/sandbox.md): 0 and ABI 0
	// before start-up applied it or when the process is not confined.
	confined, abi := 0, 0
	if r := confine.Current(); r != nil {
		abi = r.ABI
		if r.Confined {
			confined = 1
		}
	}
	Header(&b, "kiln_sandbox_confined", "gauge", "1 when the process and its children are confined by Landlock, else 0.")
	fmt.Fprintf(&b, "kiln_sandbox_confined{%s} %d\n", wf, confined)
	Header(&b, "kiln_sandbox_landlock_abi", "gauge", "The kernel's Landlock ABI version (0: none).")
	fmt.Fprintf(&b, "kiln_sandbox_landlock_abi{%s} %d\n", wf, abi)
	_, err := io.WriteString(w, b.String())
	return err
}

func sortKeys(keys []runKey) {
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].start < keys[j].start || keys[i].start == keys[j].start && keys[i].status < keys[j].status
	})
}

// Histogram is one histogram series over DurationBuckets.
type Histogram struct {
	counts []int64 // per bucket, not cumulative
	sum    float64
	count  int64
}

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{counts: make([]int64, len(DurationBuckets))} }

// Observe adds one value in seconds; the caller holds its own lock.
func (h *Histogram) Observe(v float64) { h.observe(v) }

func (h *Histogram) observe(v float64) {
	for i, le := range DurationBuckets {
		if v <= le {
			h.counts[i]++
			break
		}
	}
	h.sum += v
	h.count++
}

// Write renders the series of name with labels (already escaped).
func (h *Histogram) Write(b *strings.Builder, name, labels string) {
	var cum int64
	for i, le := range DurationBuckets {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", name, labels, strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, labels, h.count)
	fmt.Fprintf(b, "%s_sum{%s} %s\n", name, labels, strconv.FormatFloat(h.sum, 'g', -1, 64))
	fmt.Fprintf(b, "%s_count{%s} %d\n", name, labels, h.count)
}

// Header writes a metric family's HELP and TYPE lines.
func Header(b *strings.Builder, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// Escape escapes a label value per the text format.
func Escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
