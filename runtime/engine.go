package runtime

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnworks/kiln/runtime/policy"
)

const (
	// MaxSteps backstops loop edges: no run executes more nodes than this.
	MaxSteps = 10000
	// MaxCallDepth bounds call/parallel/map nesting.
	MaxCallDepth = 8
)

// Engine runs programs. One engine serves many concurrent runs.
type Engine struct {
	// Audit receives structured audit events (policy.denied, node.retry,
	// workflow.*). Nil discards them.
	Audit *slog.Logger
	// Services are the clients handlers reach (secrets, and the families'
	// own in Services.Values).
	Services *Services
	// StateDir holds checkpoints ("" = pausing is an error).
	StateDir string
	// Policy, when set, replaces each program's own policy (fixture
	// overrides, approvals narrowing).
	Policy *policy.Policy
	// Now and Sleep are injectable for tests.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Observer, when set, sees every run and node attempt (tracing).
	Observer Observer
}

// Services are the clients capability handlers use. Fields are filled by
// the binary's CLI (flags, secrets) or by the fixture runner (mocks).
type Services struct {
	// Secret returns a secret's current value by [[secrets]] name (falling
	// back to the environment). Values must never be logged.
	Secret func(name string) (string, error)
	// Emit fires an internal.event trigger (emit_event nodes).
	Emit func(ctx context.Context, event string, payload any) error
	// Values holds the services of capability families (intelligence and
	// MCP clients, the event bus), each under an unexported key type of its
	// package and reached through that package's typed accessors.
	Values sync.Map
}

// RunOptions starts one run.
type RunOptions struct {
	Start       string         // start node name ("" = default)
	Trigger     map[string]any // built with MakeTrigger; nil = manual, empty
	DryRun      bool
	Timeout     time.Duration // 0 = [budget].max_run_time_secs, else none
	ExecutionID string        // "" = random
	// Resume continues a checkpointed run instead of starting fresh.
	Resume *Checkpoint
	// CheckpointEachNode writes a checkpoint after every node (crash
	// recovery with --resume-incomplete). Needs StateDir.
	CheckpointEachNode bool
}

// MakeTrigger builds the `trigger` context value: an object payload's
// fields are hoisted, any other payload sits under "input", and kind is set
// last so a payload cannot spoof it.
func MakeTrigger(kind string, payload any) map[string]any {
	var t map[string]any
	switch p := payload.(type) {
	case map[string]any:
		t = make(map[string]any, len(p)+1)
		for k, v := range p {
			t[k] = v
		}
	case nil:
		t = make(map[string]any, 1)
	default:
		t = make(map[string]any, 2)
		t["input"] = p
	}
	t["kind"] = kind
	return t
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// nowSince is now, read as base plus the monotonic time elapsed since
// base: the engine reads the clock at every step, and the monotonic clock
// alone costs a fraction of a wall-clock reading (4x less on a VM whose
// wall clock leaves the vDSO). Durations and deadlines compare monotonic
// readings either way.
func (e *Engine) nowSince(base time.Time) time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return base.Add(time.Since(base))
}

// since is the time elapsed since base, on the monotonic clock (or on
// the test's, when Now is injected).
func (e *Engine) since(base time.Time) time.Duration {
	if e.Now != nil {
		return e.Now().Sub(base)
	}
	return time.Since(base)
}

func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) audit() *slog.Logger {
	if e.Audit != nil {
		return e.Audit
	}
	return discardLogger
}

// discardLogger's handler reports every level disabled, so audit calls on an
// engine without a logger cost nothing (no formatting, no allocation).
var discardLogger = slog.New(slog.DiscardHandler)

func (e *Engine) services() *Services {
	if e.Services != nil {
		return e.Services
	}
	return &Services{Secret: EnvSecret} // no registry: secrets come from the environment
}

// NewExecutionID returns a random run id. Run ids must be unique, not
// secret: math/rand/v2's global source (ChaCha8, seeded by the OS) is enough
// and keeps crypto/rand and math/big out of binaries that need no crypto.
func NewExecutionID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], mrand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], mrand.Uint32())
	var text [2 * len(b)]byte // on the stack: the id is one allocation
	hex.Encode(text[:], b[:])
	return string(text[:])
}

// Run is the state of one executing workflow. Handlers reach it through
// Call.Run.
type Run struct {
	Engine  *Engine
	Program *Program
	// ExecutionID is a top-level run's id; read ID(), which builds a
	// child's on first use.
	ExecutionID string
	StartNode   string
	DryRun      bool
	Deadline    time.Time // zero: none
	Depth       int
	Counters    *Counters

	budget *budget
	parent *Run
	// spare is the memory of this run's last child run on its own
	// goroutine, reused by the next RunChildren (call runs one child per
	// node, often in a loop or a chain).
	spare atomic.Pointer[childState]
	// children numbers this run's child runs: a child's id is this run's
	// id and a number taken from here, unique among all its children
	// (concurrent map and parallel children included) and costing no
	// randomness (see ID and childIDs).
	children atomic.Uint64
	// idNum is a child's number under its parent, 0 in a top-level run:
	// its id is the parent's, a dot and the number, which ID() builds
	// once (idOnce), when something asks for it. Most children of a map
	// are never asked: their id would be a string built for nothing.
	idNum  uint64
	idOnce sync.Once
	// call is the Call handed to the current node's handler: a run
	// executes one node at a time, and a handler must not keep its Call
	// after it returns.
	call Call
	// completion is the outcome of a completed run, allocated with it.
	completion Outcome

	// mu guards outputs: a run writes them once a step and reads them
	// on every context lookup, its own goroutine nearly always (a plain
	// mutex costs half the atomics of a read-write one).
	mu      sync.Mutex
	outputs []nodeOutput   // by programNode.pos
	trigger map[string]any // see Trigger; nil in a child until asked for
	// A child's trigger is MakeTrigger(triggerKind, triggerInput), built
	// on demand (resolveTrigger). A top-level run keeps its trigger's
	// kind in triggerKind too (setTrigger): a call passes it to a child
	// at every step, and it is a map lookup.
	lazyTrigger  bool
	triggerKind  string
	triggerInput any
	triggerOnce  sync.Once
	loops        map[int]int // by edge index; nil until a loop edge fires
	trace        *Trace
	respond      *HTTPResponse
	last         string

	// nodeAt is when the current node started, as time since begun
	// (read at every step of a run with a trace or a deadline).
	nodeAt time.Duration
	// begun and ended are the engine's clock readings at the run's start
	// and end, shared by its trace, outcome, report and audit events
	// (a clock reading costs about as much as a map lookup, and a
	// one-node run would otherwise take seven). A run that is not timed
	// reads neither; begun may still be set, as a base for its children.
	begun, ended time.Time
}

// timed reports whether the run reads the clock at its start and end: a
// top-level run (its report, audit and metrics give its duration), and a
// child that keeps a trace or has a deadline, its own or its context's.
// Any other child's elapsed time is read by nobody: an outcome shows
// elapsed_ms only when it timed out, which needs a deadline, and a child
// of RunChildren keeps no trace. The reading it saves is a tenth of a map
// item's child run on a VM.
func (r *Run) timed(ctx context.Context) bool {
	return r.Depth == 0 || r.trace != nil || hasDeadline(ctx, r.Deadline)
}

// hasDeadline reports whether a run with deadline (zero: none) running
// under ctx has a deadline.
func hasDeadline(ctx context.Context, deadline time.Time) bool {
	if !deadline.IsZero() {
		return true
	}
	_, ok := ctx.Deadline()
	return ok
}

// runState is everything a top-level run allocates up front, in one
// allocation: the run, its counters, budget, trace and report.
type runState struct {
	run      Run
	counters Counters
	budget   budget
	trace    Trace
	report   Report
}

// budget is shared by a run and its children: a call/parallel/map cannot
// out-spend the top-level run's envelope.
type budget struct {
	maxTokens  int64 // 0 = unlimited
	maxFSWrite int64 // bytes; 0 = unlimited
	mu         sync.Mutex
	used       int64
	fsWritten  int64
}

// Resolve looks up a dotted context path: the first segment is a node id or
// `trigger`; any miss is (nil, false).
func (r *Run) Resolve(path string) (any, bool) {
	head, rest, _ := strings.Cut(path, ".")
	if head == "trigger" {
		return r.resolveTrigger(rest)
	}
	r.mu.Lock()
	var root any
	var ok bool
	if pn, found := r.Program.nodes[head]; found {
		root, ok = r.outputs[pn.pos].value, r.outputs[pn.pos].set
	}
	r.mu.Unlock()
	if !ok {
		return nil, false
	}
	return Lookup(root, rest)
}

// Trigger returns the run's trigger value.
func (r *Run) Trigger() map[string]any {
	if r.lazyTrigger {
		r.triggerOnce.Do(func() { r.trigger = MakeTrigger(r.triggerKind, r.triggerInput) })
	}
	return r.trigger
}

// resolveTrigger looks up path inside the trigger. A child run answers
// from its kind and input as MakeTrigger would arrange them, without
// building its trigger map until something asks for all of it: a map
// per child is most of what a small child run allocates.
func (r *Run) resolveTrigger(path string) (any, bool) {
	if !r.lazyTrigger || path == "" {
		return Lookup(r.Trigger(), path)
	}
	seg, rest, more := strings.Cut(path, ".")
	root, ok := r.triggerField(seg)
	if !ok {
		return nil, false
	}
	if !more {
		return root, true
	}
	return lookupSegments(root, rest)
}

// triggerField is the field name of a child's trigger: kind, an object
// input's own fields, or any other input under "input".
func (r *Run) triggerField(name string) (any, bool) {
	if name == "kind" {
		return r.triggerKind, true
	}
	switch p := r.triggerInput.(type) {
	case map[string]any:
		v, ok := p[name]
		return v, ok
	case nil:
		return nil, false
	default:
		return p, name == "input"
	}
}

// kind is the run's trigger kind.
func (r *Run) kind() string {
	if r.lazyTrigger || r.triggerKind != "" {
		return r.triggerKind
	}
	k, _ := r.trigger["kind"].(string)
	return k
}

// setTrigger sets a top-level run's trigger.
func (r *Run) setTrigger(t map[string]any) {
	r.trigger = t
	r.triggerKind, _ = t["kind"].(string)
}

// Outputs returns a copy of the node outputs so far.
func (r *Run) Outputs() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]any, len(r.outputs))
	for i, o := range r.outputs {
		if o.set {
			out[r.Program.order[i]] = o.value
		}
	}
	return out
}

// nodeOutput is one node's latest output in a run.
type nodeOutput struct {
	value any
	set   bool // the node has run (its output may be null)
}

// Policy returns the policy in force for this run.
func (r *Run) Policy() *policy.Policy {
	if r.Engine.Policy != nil {
		return r.Engine.Policy
	}
	return r.Program.Policy
}

// Audit returns the audit logger, tagged with the run id. (Handlers that
// log call it; the engine's own events skip it.)
func (r *Run) Audit() *slog.Logger {
	return r.Engine.audit().With("execution_id", r.ID(), "workflow", r.Program.Workflow.Name)
}

// Services returns the engine's services.
func (r *Run) Services() *Services { return r.Engine.services() }

// CheckTokens fails when the run's token budget is already spent; call it
// before an intelligence call.
func (r *Run) CheckTokens() error {
	b := r.budget
	if b.maxTokens <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.maxTokens {
		return Errorf(ClassBudget, "token budget exhausted: %d of max_llm_tokens %d used", b.used, b.maxTokens)
	}
	return nil
}

// AddTokens bills one intelligence call and fails when the run's budget is
// exceeded; call it after each call.
func (r *Run) AddTokens(n int64) error {
	r.Counters.LLMCalls.Add(1)
	r.Counters.LLMTokens.Add(n)
	b := r.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	if b.maxTokens > 0 && b.used > b.maxTokens {
		return Errorf(ClassBudget, "token budget exceeded: %d of max_llm_tokens %d used", b.used, b.maxTokens)
	}
	return nil
}

// AddFSWrite accounts n bytes about to be written by a file node against
// [budget].max_fs_write_mb; it fails (and accounts nothing) when the write
// would exceed the run's budget. Call it before writing.
func (r *Run) AddFSWrite(n int64) error {
	b := r.budget
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.maxFSWrite > 0 && b.fsWritten+n > b.maxFSWrite {
		return Errorf(ClassBudget, "filesystem write budget exceeded: %d + %d bytes > max_fs_write_mb (%d bytes)",
			b.fsWritten, n, b.maxFSWrite)
	}
	b.fsWritten += n
	return nil
}

// RecordDenial counts and audits a policy denial. The engine calls it for
// every denial that aborts a run; handlers that handle a denial themselves
// (agent_loop tools) call it so the denial is still counted and audited.
func (r *Run) RecordDenial(node, kind string, err error) {
	r.Counters.PolicyDenials.Add(1)
	if o, ok := r.Engine.Observer.(DenialObserver); ok {
		o.Denied(r, kind, err)
	}
	e := AsError(err)
	source := "allowlist"
	if d := (*policy.Denial)(nil); errors.As(err, &d) && d.Source != "" {
		source = d.Source // "rego": [policy.rego] denied what the allowlist allowed
	}
	r.auditf(slog.LevelWarn, "policy.denied", "node", node, "kind", kind, "target", e.Target, "reason", e.Msg, "source", source)
}

// Run executes p once and returns its report. It never panics on workflow
// input: handler panics are converted to errored outcomes.
func (e *Engine) Run(ctx context.Context, p *Program, opts RunOptions) *Report {
	start := e.now()
	id := opts.ExecutionID
	if id == "" {
		id = NewExecutionID()
	}
	if opts.Resume != nil {
		id = opts.Resume.RunID // a resumed run keeps its id
	}
	trig := opts.Trigger
	if trig == nil {
		trig = MakeTrigger("manual", nil)
	} else if !isNormal(trig) {
		// The trigger is where outside data enters a run: it is made a
		// value tree once, here, so that node outputs built from the
		// context are value trees too (NodeKind.ValueModel).
		trig, _ = Normalize(trig).(map[string]any)
	}
	st, outputs, entries := newRunState(len(p.order))
	st.trace = Trace{ExecutionID: id, Entries: entries}
	run := &st.run
	run.Engine = e
	run.Program = p
	run.ExecutionID = id
	run.StartNode = opts.Start
	run.DryRun = opts.DryRun
	run.Counters = &st.counters
	run.budget = &st.budget
	run.outputs = outputs
	run.setTrigger(trig)
	run.trace = &st.trace
	if b := p.Workflow.Budget; b != nil {
		run.budget.maxTokens = b.MaxLLMTokens
		run.budget.maxFSWrite = b.MaxFSWriteMB << 20
	}
	timeout := opts.Timeout
	if timeout == 0 && p.Workflow.Budget != nil && p.Workflow.Budget.MaxRunTimeSecs > 0 {
		timeout = time.Duration(p.Workflow.Budget.MaxRunTimeSecs) * time.Second
	}
	if timeout > 0 {
		run.Deadline = start.Add(timeout)
	}
	if opts.Start == "" {
		run.StartNode = p.DefaultStart()
	}
	// A durable run locks and loads its checkpoint before it executes,
	// and settles it after: it reads the clock again at both ends.
	plain := opts.Resume == nil && !opts.CheckpointEachNode
	if plain {
		run.begun = start
	}
	out := run.durable(ctx, opts) // execute, with checkpoint lock and settling (durable.go)
	end := run.ended
	if !plain {
		end = e.now()
	}
	st.report = Report{
		Workflow:    p.Workflow.Name,
		StartNode:   run.StartNode,
		ExecutionID: id,
		Outcome:     out,
		Trace:       run.trace,
		Counters:    run.Counters,
		WallMS:      end.Sub(start).Milliseconds(),
	}
	return &st.report
}

// smallRunState is a runState with room for the outputs and trace of a
// run of up to smallRun nodes (a served route is often a single respond),
// so such a run allocates its state at once. (Room for one node takes
// the state from 704 to 896 bytes, less than the two allocations it
// saves; room for two would take it to 1024.)
type smallRunState struct {
	// Not comparable: no equality function for it in every binary.
	_ [0]func()
	runState
	outputs [smallRun]nodeOutput
	entries [smallRun]TraceEntry
}

const smallRun = 1

// newRunState allocates a run's state, its outputs for nodes nodes and
// its empty trace.
func newRunState(nodes int) (*runState, []nodeOutput, []TraceEntry) {
	if nodes <= smallRun {
		s := &smallRunState{}
		return &s.runState, s.outputs[:nodes], s.entries[:0]
	}
	return &runState{}, make([]nodeOutput, nodes), newTraceEntries(nodes)
}

// childState is everything a child run allocates up front, in one
// allocation; a child of up to smallChild nodes (the common map or
// parallel item) keeps its outputs in it too.
type childState struct {
	run     Run
	outputs [smallChild]nodeOutput
	// counters are what the children of one RunChildren worker count,
	// added to the parent's when the worker is done: workers on other
	// cores would otherwise all write the parent's few cache lines, three
	// times per child.
	counters Counters
	// ids are the child ids RunOneChild reserved for the run whose spare
	// this is (reset leaves them: they are not the child's).
	ids childIDs
}

const smallChild = 2

// RunChild runs a child workflow (call, parallel, map) on the same engine,
// policy, counters, token budget and deadline, one level deeper. input
// becomes the child's trigger payload.
func (r *Run) RunChild(ctx context.Context, child *Program, start string, input any) (*Outcome, *Trace) {
	if !isNormal(input) { // a caller's own value, not one from the context
		input = Normalize(input)
	}
	trace := &Trace{}
	out, _ := r.runChild(ctx, child, start, input, r.children.Add(1), time.Time{}, &childState{}, trace, r.Counters)
	return out, trace
}

// ID is the run's execution id: a top-level run's own, a child's its
// parent's id, a dot and its number, unique among all the parent's
// children (concurrent map and parallel children included) and costing
// no randomness.
func (r *Run) ID() string {
	if r.idNum != 0 {
		r.idOnce.Do(r.buildID)
	}
	return r.ExecutionID
}

func (r *Run) buildID() {
	r.ExecutionID = r.parent.ID() + "." + strconv.FormatUint(r.idNum, 10)
}

// childIDs hands a RunChildren worker the numbers of its children: it
// reserves up to idBatch of the run's child numbers at a time, so that
// workers on other cores do not all update the run's counter for every
// child. A worker that reserved more than it ran leaves gaps.
type childIDs struct {
	next, end uint64 // reserved and not yet used: [next, end)
	reserved  int    // in all
}

const idBatch = 16

// take returns the worker's next child number; want is how many children
// are left to run at most (the size of the next reservation, up to
// idBatch).
func (ids *childIDs) take(r *Run, want int) uint64 {
	if ids.next == ids.end {
		k := uint64(min(idBatch, max(1, want)))
		ids.end = r.children.Add(k) + 1
		ids.next = ids.end - k
		ids.reserved += int(k)
	}
	ids.next++
	return ids.next - 1
}

// runChild is RunChild in st (zero), recording its path in trace (nil:
// none), counting in counters (r's own, or ones added to r's later),
// starting at the clock reading at (zero: read the clock if the child is
// timed, Run.timed) and returning the reading that ended the child (zero
// if it did not run or was not timed). The outcome may live in st.
func (r *Run) runChild(ctx context.Context, child *Program, start string, input any, num uint64, at time.Time, st *childState, trace *Trace, counters *Counters) (*Outcome, time.Time) {
	if r.Depth+1 > MaxCallDepth {
		return &Outcome{Status: StatusErrored, Reason: fmt.Sprintf("call depth exceeds %d", MaxCallDepth),
			Err: Errorf(ClassWorkflow, "call depth exceeds %d", MaxCallDepth)}, time.Time{}
	}
	if start == "" {
		start = child.DefaultStart()
	}
	// A worker's next child is most often the previous one's sibling, in
	// the same memory: what they share is not written again (while the
	// GC marks, every pointer written costs a write barrier).
	c := &st.run
	set(&c.Engine, r.Engine)
	set(&c.Program, child)
	c.idNum = num
	set(&c.StartNode, start)
	c.DryRun = r.DryRun
	set(&c.Deadline, r.Deadline)
	c.Depth = r.Depth + 1
	set(&c.Counters, counters)
	set(&c.budget, r.budget)
	set(&c.parent, r)
	c.lazyTrigger = true
	set(&c.triggerKind, r.kind()) // a field (setTrigger, or a child's own)
	c.triggerInput = input
	if trace != nil {
		c.trace = trace
		*trace = Trace{ExecutionID: c.ID(), Entries: newTraceEntries(len(child.order))}
	}
	if n := len(child.order); n <= smallChild {
		if len(c.outputs) != n || n > 0 && &c.outputs[0] != &st.outputs[0] {
			c.outputs = st.outputs[:n]
		}
	} else {
		c.outputs = make([]nodeOutput, n)
	}
	c.begun = at
	out := c.execute(ctx, RunOptions{Start: start})
	return out, c.ended
}

// set stores v in *dst unless it holds v already.
func set[T comparable](dst *T, v T) {
	if *dst != v {
		*dst = v
	}
}

// ChildJob is one child run for RunChildren.
type ChildJob struct {
	Program *Program
	Start   string
	// Input is the child's trigger payload: a value from the run's
	// context, which is a value tree already (RunChild normalises any
	// other value; RunChildren, which may run thousands, does not walk
	// them).
	Input any
}

// RunChildren runs n child runs, job(i) the i-th, as RunChild does, on at
// most workers goroutines, the calling one included, and hands each
// outcome to done(i, out) on the goroutine that ran the child, as soon as
// it ended (out is valid during the call only: it may live in memory the
// worker's next child reuses). done is not called for a job that did not
// start. A worker starts the next job as soon as it finished one, with no
// barrier between groups of jobs, so a map of many items starts
// workers-1 goroutines and not one per item (each new goroutine would
// also grow its stack again for the walk); one job, or one worker, starts
// none. Nor do children that never wait (Program.noWait), until they
// have run for helpersAfter, and then no more than there are threads
// (GOMAXPROCS): their nodes only compute, so more goroutines than threads
// buy nothing, and handing a few short children to other threads costs
// more than running them. A worker reuses the clock reading
// that ended its previous child as the next child's start, and the memory
// of its previous child's run (a handler must not keep its Call, or the
// Run, after it returns). Jobs start in order; after an outcome that is
// neither completed, failed nor timed out (an engine error, a pause), or
// once ctx is done, no further job starts. The children keep no trace:
// their nodes are seen by the engine's observer and audit as any node is.
func (r *Run) RunChildren(ctx context.Context, n, workers int, job func(i int) ChildJob, done func(i int, out *Outcome)) {
	js := &jobs{n: n, job: job, done: done}
	var pool *jobPool
	if workers > 1 && n > 1 {
		pool = &jobPool{workers: min(workers, n)}
	}
	if st := r.runJobs(ctx, js, r.spare.Swap(nil), pool, true); st != nil {
		r.spare.Store(st)
	}
	if pool != nil {
		pool.helpers.Wait()
	}
}

// helpersAfter is how long children that never wait run on the calling
// goroutine alone before RunChildren starts its other workers: about ten
// times what starting a goroutine and waking a thread for it costs.
const helpersAfter = 50 * time.Microsecond

// jobs is what RunChildren was asked to run.
type jobs struct {
	n    int
	job  func(i int) ChildJob
	done func(i int, out *Outcome)
}

// RunOneChild runs one job as RunChildren does with one job (on the
// calling goroutine, in the run's spare child memory) and returns its
// outcome, empty when the job did not start: call runs a child per node,
// and this costs it no slices.
func (r *Run) RunOneChild(ctx context.Context, j ChildJob) (out Outcome) {
	st := reuse(r.spare.Swap(nil))
	if ctx.Err() == nil {
		// The spare's ids are this run's: reserved 1, 1, 2, 4, ... up to
		// idBatch at a time, as calls in a chain or loop take them.
		num := st.ids.take(r, max(1, st.ids.reserved))
		var at time.Time // the child keeps no trace: it is timed only with a deadline
		if hasDeadline(ctx, r.Deadline) {
			at = r.startReading()
		}
		o, _ := r.runChild(ctx, j.Program, j.Start, j.Input, num, at, st, nil, r.Counters)
		out = *o // o may live in st
	}
	r.spare.Store(st)
	return out
}

// startReading is the clock reading a child of r starts at, read as
// cheaply as it can be: a run that reads the clock at every step (it
// keeps a trace or has a deadline) started its current node, whose
// handler starts the child, at its last reading; another run reads the
// monotonic clock alone, as time since it began (a wall-clock reading
// costs several times more on a VM).
func (r *Run) startReading() time.Time {
	switch {
	case r.begun.IsZero():
		return r.Engine.now()
	case r.trace != nil || !r.Deadline.IsZero():
		return r.begun.Add(r.nodeAt)
	}
	return r.Engine.nowSince(r.begun)
}

// reuse returns st reset for the next child, or a new childState when st
// is nil.
func reuse(st *childState) *childState {
	if st == nil {
		return &childState{}
	}
	st.reset()
	return st
}

// reset makes a used childState as fresh as a zero one, for the next
// child: nothing of the previous child's run may reach it. Only the
// fields runChild does not set are cleared here (clearing the whole
// struct, half a kilobyte of pointers, costs a write barrier on every
// word while the GC marks); TestChildStateResetIsComplete fails when Run
// gains a field this does not know about.
func (st *childState) reset() {
	c := &st.run
	if c.spare.Load() != nil { // an atomic store costs more than a load
		c.spare.Store(nil)
	}
	if c.children.Load() != 0 {
		c.children.Store(0)
	}
	// Call and Outcome field by field, writing only what is set.
	k, o := &c.call, &c.completion
	set(&k.Node, nil)
	set(&k.Run, nil)
	k.Attempt = 0
	if k.Scope != nil {
		k.Scope = nil
	}
	set(&o.Status, "")
	set(&o.FinalValue, nil)
	set(&o.LastNode, "")
	set(&o.Reason, "")
	o.ElapsedMS = 0
	set(&o.RunID, "")
	set(&o.HTTPResponse, nil)
	set(&o.Err, nil)
	if c.ExecutionID != "" {
		c.ExecutionID = ""
	}
	c.idOnce = sync.Once{}
	c.trigger = nil
	c.triggerOnce = sync.Once{}
	c.loops = nil
	c.trace = nil
	c.respond = nil
	c.last = ""
	c.nodeAt = 0
	c.ended = time.Time{}
	for i := range st.outputs { // only those set: clear() calls out for the pointers
		if st.outputs[i].set {
			st.outputs[i] = nodeOutput{}
		}
	}
}

// jobPool is what RunChildren's workers share: the next job to start,
// whether to start no more, how many workers there may be and the
// goroutines of all but the calling one, which that one alone starts
// (and alone reads started, timed and begun).
type jobPool struct {
	next    atomic.Int64
	stop    atomic.Bool
	workers int
	helpers sync.WaitGroup
	started int       // helpers started
	timed   bool      // helpersAfter passed
	begun   time.Time // when the calling goroutine took its first job
	checkAt int       // the next job before which helpersDue reads the clock
}

// helpersDue reports whether helpersAfter has passed since the calling
// goroutine took its first job, before it starts job i; at is when its
// previous child ended, zero when that child was not timed (Run.timed).
// It then reads the clock itself, before jobs 1, 2 and 4 and every
// checkEvery jobs after that, so helpers start at most checkEvery-1
// children late and most untimed children cost no clock reading at all.
func (pool *jobPool) helpersDue(r *Run, i int, at time.Time) bool {
	if at.IsZero() {
		if i < pool.checkAt {
			return false
		}
		pool.checkAt = i + min(max(i, 1), checkEvery)
		at = r.Engine.nowSince(pool.begun)
	}
	return at.Sub(pool.begun) >= helpersAfter
}

// checkEvery is how many untimed children the calling goroutine runs at
// most between two readings of the clock while it may still start helpers.
const checkEvery = 4

// startHelpers starts RunChildren's other workers, up to n in all; next
// is the first job the calling goroutine has not taken.
func (r *Run) startHelpers(ctx context.Context, js *jobs, pool *jobPool, n, next int) {
	if pool.started == 0 {
		pool.next.Store(int64(next))
	}
	for ; pool.started < n; pool.started++ {
		pool.helpers.Go(func() { r.runJobs(ctx, js, nil, pool, false) })
	}
}

// runJobs is one RunChildren worker: it runs the next job until none is
// left or pool says stop (pool nil: the only worker, taking the jobs in
// turn), in st (nil: allocated here), and returns st for reuse. One of
// several workers counts in st and adds its counts to r's when it is
// done, before RunChildren returns. The calling goroutine's worker (lead)
// starts the others before the first job that may wait, or, as many as
// there are threads, once the jobs have run for helpersAfter.
func (r *Run) runJobs(ctx context.Context, js *jobs, st *childState, pool *jobPool, lead bool) *childState {
	var at time.Time // the end of this worker's previous child
	var ids childIDs
	if pool != nil {
		if lead {
			at = r.startReading() // the first child's start
			pool.begun = at
		}
		defer func() {
			if st != nil {
				st.counters.moveTo(r.Counters)
			}
		}()
	}
	for i := 0; ; i++ {
		// The calling goroutine takes its jobs in turn while it runs
		// alone; startHelpers hands the count to the pool.
		if pool != nil && (!lead || pool.started > 0) {
			if pool.stop.Load() {
				break
			}
			i = int(pool.next.Add(1) - 1)
		}
		if i >= js.n || ctx.Err() != nil {
			break
		}
		st = reuse(st)
		j := js.job(i)
		// A worker's share of the jobs left is about as many ids as it
		// will use (parallel's workers run about one child each).
		share := js.n - i
		counters := r.Counters
		if pool != nil {
			if lead && pool.started < pool.workers-1 {
				switch {
				case !j.Program.noWait:
					r.startHelpers(ctx, js, pool, pool.workers-1, i+1)
				case !pool.timed && pool.helpersDue(r, i, at):
					// Children that only compute use no more
					// goroutines than there are threads to run them.
					pool.timed = true
					r.startHelpers(ctx, js, pool, min(pool.workers, goruntime.GOMAXPROCS(0))-1, i+1)
				}
			}
			workers := pool.workers // helpers do not read started
			if lead {
				workers = pool.started + 1
			}
			share = (share + workers - 1) / workers
			counters = &st.counters
		}
		var out *Outcome
		out, at = r.runChild(ctx, j.Program, j.Start, j.Input, ids.take(r, share), at, st, nil, counters)
		js.done(i, out)
		switch out.Status {
		case StatusCompleted, StatusFailed, StatusTimedOut:
		default:
			if pool == nil {
				return st
			}
			pool.stop.Store(true)
		}
	}
	if pool != nil {
		pool.stop.Store(true)
	}
	return st
}

// moveTo adds c's counts to to's and zeroes c.
func (c *Counters) moveTo(to *Counters) {
	for _, f := range [...]struct{ from, to *atomic.Int64 }{
		{&c.WorkflowStarts, &to.WorkflowStarts}, {&c.WorkflowCompletions, &to.WorkflowCompletions},
		{&c.WorkflowFailures, &to.WorkflowFailures}, {&c.WorkflowTimeouts, &to.WorkflowTimeouts},
		{&c.WorkflowErrored, &to.WorkflowErrored}, {&c.WorkflowPaused, &to.WorkflowPaused},
		{&c.NodeExecutions, &to.NodeExecutions}, {&c.NodeFailures, &to.NodeFailures},
		{&c.PolicyDenials, &to.PolicyDenials}, {&c.LLMCalls, &to.LLMCalls}, {&c.LLMTokens, &to.LLMTokens},
	} {
		if n := f.from.Swap(0); n != 0 {
			f.to.Add(n)
		}
	}
}

// auditf emits one audit event tagged with the run, building nothing when
// the logger drops the level (the engine's hot path logs per run, not per
// node, but retries and denials must stay cheap too). attrs are key-value
// pairs as for slog.Logger.Log.
func (r *Run) auditf(level slog.Level, msg string, attrs ...any) {
	h := r.Engine.audit().Handler()
	if !h.Enabled(context.Background(), level) {
		return
	}
	rec := slog.NewRecord(time.Now(), level, msg, 0)
	rec.AddAttrs(slog.String("execution_id", r.ID()), slog.String("workflow", r.Program.Workflow.Name))
	rec.Add(attrs...)
	_ = recipient(h, &rec).Handle(context.Background(), rec)
}

// auditRun emits workflow.started (out == nil) or the run's end event,
// workflow.<status>: info for completed and paused runs, warn for the
// others. Every run logs both, so the record is built by hand, with typed
// attributes: slog.Logger.Log would box each value and capture the
// caller's program counter, which no audit handler reports. (The record
// is large and this call sits on a request's deepest stack: it is built
// once, here, and copied once, into the handler.) at is the engine's
// clock reading for the event.
func (r *Run) auditRun(out *Outcome, at time.Time) {
	level, msg := slog.LevelInfo, "workflow.started"
	if out != nil {
		msg = endEvent(out.Status)
		if out.Status == StatusErrored || out.Status == StatusFailed || out.Status == StatusTimedOut {
			level = slog.LevelWarn
		}
	}
	h := r.Engine.audit().Handler()
	if !h.Enabled(context.Background(), level) {
		return
	}
	var rec slog.Record // slog.NewRecord, without a temporary copy on the stack
	if r.Engine.Now != nil {
		at = time.Now() // audit lines carry the wall clock, not a test's
	}
	rec.Time, rec.Level, rec.Message = at, level, msg
	rec.AddAttrs(slog.String("execution_id", r.ID()), slog.String("workflow", r.Program.Workflow.Name))
	if out == nil {
		rec.AddAttrs(slog.String("start_node", r.StartNode), slog.Bool("dry_run", r.DryRun))
		r.addTriggerAttrs(&rec) // audit.go: trigger kind and principal
	} else {
		rec.AddAttrs(slog.String("status", out.Status), slog.String("last_node", out.LastNode),
			slog.Int64("elapsed_ms", out.ElapsedMS))
		if out.Reason != "" {
			rec.AddAttrs(slog.String("reason", out.Reason))
		}
	}
	_ = recipient(h, &rec).Handle(context.Background(), rec)
}

// endEvent is the message of a run's end event, without building a string
// for the known statuses.
func endEvent(status string) string {
	switch status {
	case StatusCompleted:
		return "workflow.completed"
	case StatusFailed:
		return "workflow.failed"
	case StatusTimedOut:
		return "workflow.timed_out"
	case StatusPaused:
		return "workflow.paused"
	case StatusErrored:
		return "workflow.errored"
	}
	return "workflow." + status
}

func (r *Run) execute(ctx context.Context, opts RunOptions) (out *Outcome) {
	e := r.Engine
	timed := r.timed(ctx)
	started := r.begun
	if started.IsZero() && timed {
		started = e.now()
		r.begun = started
	}
	// prev is when the current node started, as time since started: one
	// clock reading per step serves the deadline check, the previous
	// node's elapsed time in the trace and a call's child's start.
	prev := &r.nodeAt
	*prev = 0
	r.Counters.WorkflowStarts.Add(1)
	// A resumed run takes its start node and trigger from the checkpoint
	// before it is observed and audited, so its span and started event
	// carry them.
	var resumeErr error
	if cp := opts.Resume; cp != nil {
		resumeErr = r.restore(cp)
	}
	// Registered first so it runs last, seeing the settled outcome.
	if o := e.Observer; o != nil {
		var end func(*Outcome)
		ctx, end = o.StartRun(ctx, r)
		defer func() { end(out) }()
	}
	if r.Depth == 0 {
		r.auditRun(nil, started)
	}
	defer func() {
		var end time.Time
		if timed {
			end = e.nowSince(started)
			r.ended = end
			r.finishTrace(end.Sub(started) - *prev)
			if out.Status != StatusTimedOut {
				out.ElapsedMS = end.Sub(started).Milliseconds()
			}
		}
		switch out.Status {
		case StatusCompleted:
			r.Counters.WorkflowCompletions.Add(1)
		case StatusFailed:
			r.Counters.WorkflowFailures.Add(1)
		case StatusTimedOut:
			r.Counters.WorkflowTimeouts.Add(1)
		case StatusErrored:
			r.Counters.WorkflowErrored.Add(1)
		case StatusPaused:
			r.Counters.WorkflowPaused.Add(1)
		}
		if r.Depth == 0 {
			r.auditRun(out, end)
		}
	}()

	// A child's context already ends at the shared deadline: a context
	// (and a timer) per child run would only add cost.
	if !r.Deadline.IsZero() {
		if dl, ok := ctx.Deadline(); !ok || dl.After(r.Deadline) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, r.Deadline)
			defer cancel()
		}
	}
	if resumeErr != nil {
		return r.errored(resumeErr)
	}
	return r.walk(ctx, opts, started, prev)
}

// walk runs the nodes from the entry (or the resumed node) until the run
// ends. It is execute's loop, in a function of its own so that its large
// stack frame is gone by the time execute's deferred work logs the end of
// the run (audit records are big and slog's calls deep; a request's stack
// that stays small is not grown and shrunk again around every GC).
// *prev is when the current node started, as time since started.
func (r *Run) walk(ctx context.Context, opts RunOptions, started time.Time, prev *time.Duration) *Outcome {
	e := r.Engine
	var cur string
	var pn *programNode
	if cp := opts.Resume; cp != nil {
		cur = cp.NextNode // restored by execute
	} else if de := r.Program.defaultEntry; de != nil && r.StartNode == r.Program.DefaultStart() {
		cur, pn = de.node.ID, de
	} else {
		entry, err := r.Program.Entry(r.StartNode)
		if err != nil {
			return r.errored(err)
		}
		cur = entry
	}

	// Time is kept as durations since started: a step's arithmetic on
	// them is a subtraction, not time.Time's.
	limited := !r.Deadline.IsZero()
	var deadline time.Duration
	if limited { // Sub's overflow checks cost a third of a step
		deadline = r.Deadline.Sub(started)
	}
	for steps := 0; ; steps++ {
		// The deadline is checked before every node, so a run never starts
		// a node after its time is up. The first node starts at the run's
		// start reading; a later one reads the clock only for the trace or
		// the deadline (a map item's run often has neither).
		var at time.Duration
		if steps > 0 && (r.trace != nil || limited) {
			at = e.since(started)
		}
		r.finishTrace(at - *prev)
		*prev = at
		if limited && at >= deadline {
			return r.timedOut(started)
		}
		if steps >= MaxSteps {
			return r.errored(Errorf(ClassWorkflow, "step cap of %d nodes reached (a loop edge or cycle ran away)", MaxSteps))
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return r.timedOut(started)
			}
			return r.errored(Errorf(ClassConfig, "run cancelled: %v", err))
		}
		if pn == nil || pn.node.ID != cur {
			var ok bool
			if pn, ok = r.Program.nodes[cur]; !ok {
				return r.errored(Errorf(ClassWorkflow, "unknown node %q", cur))
			}
		}
		r.last = cur
		res, err := r.execNode(ctx, pn)
		if err != nil {
			ee := AsError(err)
			if ee.Node == "" {
				ee.Node, ee.Kind = pn.node.ID, pn.node.Type
			}
			r.appendTrace(pn, "error", "", nil)
			if errors.Is(ctx.Err(), context.Canceled) {
				// A signal or shutdown stopped the run, not its deadline
				// (handlers report either as a timeout).
				return r.errored(&Error{Class: ClassConfig, Node: ee.Node, Kind: ee.Kind, Msg: "run cancelled", Err: ee})
			}
			if ee.Class == ClassTimeout || errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return r.timedOut(started)
			}
			if ee.Class == ClassPolicy {
				r.RecordDenial(pn.node.ID, pn.node.Type, ee)
			}
			return r.errored(ee)
		}
		r.mu.Lock()
		r.outputs[pn.pos] = nodeOutput{res.Value, true}
		if res.Respond != nil {
			r.respond = res.Respond
		}
		r.mu.Unlock()
		r.appendTrace(pn, res.Action.String(), res.Branch, res.Value)

		switch res.Action {
		case Terminate:
			return r.completed(nil)
		case Fail:
			reason := res.Reason
			if reason == "" {
				reason = "workflow failed"
			}
			return &Outcome{Status: StatusFailed, Reason: reason, LastNode: cur}
		case Pause:
			return r.pause(pn, res.Reason)
		}

		next, err := r.pickEdge(pn, res.Branch)
		if err != nil {
			return r.errored(err)
		}
		if next == nil {
			return r.completed(res.Value)
		}
		if opts.CheckpointEachNode && r.Depth == 0 {
			if err := r.writeCheckpoint(next.to, "incomplete", ""); err != nil {
				return r.errored(err)
			}
		}
		cur, pn = next.to, next.node
	}
}

func newTraceEntries(nodes int) []TraceEntry {
	return make([]TraceEntry, 0, min(nodes, 64))
}

// appendTrace records a node that just ran; its elapsed time is filled in
// by finishTrace at the next clock reading.
func (r *Run) appendTrace(pn *programNode, outcome, branch string, output any) {
	if r.trace == nil {
		return // a child run of RunChildren
	}
	var b any
	if branch != "" {
		b = branchLabel(pn, branch)
	}
	// Field by field into the zero entry past the end, when there is
	// room: appending a literal is built aside and copied in, a write
	// barrier on every word while the GC marks.
	es := r.trace.Entries
	if len(es) == cap(es) {
		es = append(es, TraceEntry{})
	} else {
		es = es[:len(es)+1]
	}
	e := &es[len(es)-1]
	e.NodeID, e.Kind, e.Outcome, e.Branch, e.Output, e.ElapsedMS = pn.node.ID, pn.node.Type, outcome, b, output, -1
	r.trace.Entries = es
}

// branchLabel is branch as a trace entry's value: the label of the
// node's out-edge for it when there is one.
func branchLabel(pn *programNode, branch string) any {
	for i := range pn.out {
		if pn.out[i].when == branch {
			return pn.out[i].label
		}
	}
	return branch
}

// finishTrace sets the elapsed time of the last trace entry if still open.
// Only the run's own goroutine touches the trace until the run ends, so
// this needs no lock.
func (r *Run) finishTrace(elapsed time.Duration) {
	if r.trace == nil {
		return
	}
	if n := len(r.trace.Entries); n > 0 && r.trace.Entries[n-1].ElapsedMS < 0 {
		r.trace.Entries[n-1].ElapsedMS = elapsed.Milliseconds()
	}
}

// selectEdge picks the out-edge that fires for branch; "" means dead-end.
//
// An edge fires when its `when` equals the branch ("" = no branch). A loop
// edge (max_iterations = N) fires at most N times per run; while it still
// has budget it takes precedence over plain edges with the same label, and
// once spent it stops matching, so the walk leaves the loop through the
// other matching edge or dead-ends. Two eligible edges of the same sort are
// a workflow error.
func (r *Run) selectEdge(pn *programNode, branch string) (string, error) {
	ed, err := r.pickEdge(pn, branch)
	if ed == nil || err != nil {
		return "", err
	}
	return ed.to, nil
}

// pickEdge is selectEdge returning the edge itself (nil: dead-end).
func (r *Run) pickEdge(pn *programNode, branch string) (*edge, error) {
	var loop, plain *edge
	loops, plains := 0, 0
	for i := range pn.out {
		ed := &pn.out[i]
		if ed.when != branch {
			continue
		}
		if ed.loop > 0 {
			if r.loops[ed.index] >= ed.loop {
				continue // loop budget spent: no longer eligible
			}
			loops++
			loop = ed
			continue
		}
		plains++
		plain = ed
	}
	switch {
	case loops > 1:
		return nil, ambiguous(pn, loops, "loop out-edges", branch)
	case loops == 1:
		if r.loops == nil {
			r.loops = map[int]int{}
		}
		r.loops[loop.index]++
		return loop, nil
	case plains > 1:
		return nil, ambiguous(pn, plains, "out-edges", branch)
	case plains == 1:
		return plain, nil
	}
	return nil, nil
}

func ambiguous(pn *programNode, n int, what, branch string) *Error {
	label := "no branch"
	if branch != "" {
		label = fmt.Sprintf("branch %q", branch)
	}
	return &Error{Class: ClassWorkflow, Node: pn.node.ID, Kind: pn.node.Type,
		Msg: fmt.Sprintf("%d matching %s for %s", n, what, label)}
}

// execNode runs one node with its retry policy. Every attempt counts as a
// node execution, every failed attempt as a node failure.
func (r *Run) execNode(ctx context.Context, pn *programNode) (res Result, err error) {
	e := r.Engine
	attempts, backoff, on, jitter := 1, 100, "any", 0.0
	if rt := pn.node.Retry; rt != nil {
		if rt.MaxAttempts > 1 {
			attempts = rt.MaxAttempts
		}
		if rt.BackoffMS != nil {
			backoff = *rt.BackoffMS
		}
		if rt.On != "" {
			on = rt.On
		}
		jitter = rt.Jitter
	}
	nodeEvents := r.nodeEventsOn() // audit.go: node.completed / node.failed
	for attempt := 1; ; attempt++ {
		r.Counters.NodeExecutions.Add(1)
		var began time.Time
		if nodeEvents {
			began = time.Now()
		}
		res, err = r.safeCall(ctx, pn, attempt)
		if nodeEvents {
			r.auditNode(pn.node, attempt, time.Since(began), res, err)
		}
		if err == nil {
			break
		}
		r.Counters.NodeFailures.Add(1)
		if attempt >= attempts || !retryable(err, on) {
			break
		}
		wait := time.Duration(backoff*attempt) * time.Millisecond
		if jitter > 0 {
			f := 1 + jitter*(2*mrand.Float64()-1)
			wait = time.Duration(math.Max(0, float64(wait)*f))
		}
		if !r.Deadline.IsZero() && e.now().Add(wait).After(r.Deadline) {
			err = &Error{Class: ClassTimeout, Msg: "retry backoff would pass the run deadline", Err: err}
			break
		}
		r.auditf(slog.LevelWarn, "node.retry", "node", pn.node.ID, "kind", pn.node.Type, "attempt", attempt+1,
			"max_attempts", attempts, "wait_ms", wait.Milliseconds(), "error", err.Error())
		if serr := e.sleep(ctx, wait); serr != nil {
			err = &Error{Class: ClassTimeout, Msg: "run deadline reached during retry backoff", Err: serr}
			break
		}
	}
	return res, err
}

func (r *Run) safeCall(ctx context.Context, pn *programNode, attempt int) (res Result, err error) {
	if o := r.Engine.Observer; o != nil {
		var end func(Result, error)
		ctx, end = o.StartNode(ctx, r, pn.node, attempt)
		defer func() { end(res, err) }() // runs after the recover below
	}
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Class: ClassTool, Msg: fmt.Sprintf("handler panic: %v", p)}
		}
	}()
	c := &r.call
	*c = Call{Node: pn.node, Run: r, Attempt: attempt}
	res, err = pn.handler(ctx, c)
	if err != nil {
		var d *policy.Denial
		if errors.As(err, &d) && ClassOf(err) != ClassPolicy {
			err = &Error{Class: ClassPolicy, Target: d.Target, Msg: d.Error(), Err: err}
		} else if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil && ClassOf(err) != ClassPolicy {
			err = &Error{Class: ClassTimeout, Msg: "run deadline reached", Err: err}
		}
		return res, err
	}
	if !pn.valueModel && !isNormal(res.Value) {
		res.Value = Normalize(res.Value)
	}
	return res, nil
}

func (r *Run) completed(v any) *Outcome {
	// Field by field into memory that is zero: a composite literal here
	// is built aside and copied in, a write barrier on every word.
	c := &r.completion
	c.Status, c.FinalValue, c.LastNode, c.HTTPResponse = StatusCompleted, v, r.last, r.respond
	return c
}

func (r *Run) errored(err error) *Outcome {
	ee := AsError(err)
	return &Outcome{Status: StatusErrored, Reason: ee.Error(), LastNode: r.last, Err: ee}
}

func (r *Run) timedOut(started time.Time) *Outcome {
	return &Outcome{Status: StatusTimedOut, LastNode: r.last, ElapsedMS: r.Engine.now().Sub(started).Milliseconds()}
}
