package runtime

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Host is one process serving one program: the engine, the program, and
// the long-lived pieces extensions attach (HTTP server, trigger loops, MCP
// pool). Both `kiln run` and sealed binaries build exactly one.
type Host struct {
	Engine  *Engine
	Program *Program
	// DryRun applies to every run the host starts.
	DryRun bool
	// ServeMode is true when the process serves routes and triggers.
	ServeMode bool
	// DrainTimeout bounds how long listeners may take, once their Serve
	// ctx is cancelled (SIGTERM/SIGINT), to finish in-flight runs
	// (--drain-timeout-secs; the CLI sets it, default 25s).
	DrainTimeout time.Duration
	// RunTimeout is the deadline of every run the host starts without one
	// of its own (--timeout-secs), serve-mode runs included; 0 leaves it
	// to [budget].max_run_time_secs.
	RunTimeout time.Duration
	// Tapes, when set, sees every run the host fires before it starts
	// (it may return a context carrying a recorder, WithOutside) and its
	// report after: --record and --record-dir (runtime/tape). Nil costs
	// nothing.
	Tapes func(ctx context.Context, opts *RunOptions) (context.Context, func(*Report))

	readyMu sync.Mutex
	blocks  map[string]string // reasons the host is not ready yet

	reportHooks atomic.Pointer[[]func(*Report)] // copy on write: Fire reads without a lock
}

// OnReport registers fn to see the report of every run the host fires:
// route and trigger runs, one-shot and resumed runs (metrics use it).
func (h *Host) OnReport(fn func(*Report)) {
	for {
		old := h.reportHooks.Load()
		var hooks []func(*Report)
		if old != nil {
			hooks = append(hooks, *old...)
		}
		hooks = append(hooks, fn)
		if h.reportHooks.CompareAndSwap(old, &hooks) {
			return
		}
	}
}

// Fire starts one run of the host's program.
func (h *Host) Fire(ctx context.Context, opts RunOptions) *Report {
	if h.DryRun {
		opts.DryRun = true
	}
	if opts.Timeout == 0 {
		opts.Timeout = h.RunTimeout
	}
	var taped func(*Report)
	if h.Tapes != nil {
		// A copy for Tapes: &opts would move opts to the heap on every
		// run, taped or not.
		o := opts
		ctx, taped = h.Tapes(ctx, &o)
		opts = o
	}
	rep := h.Engine.Run(ctx, h.Program, opts)
	if taped != nil {
		taped(rep)
	}
	if hooks := h.reportHooks.Load(); hooks != nil {
		for _, fn := range *hooks {
			fn(rep)
		}
	}
	return rep
}

// BlockReady marks the host not ready for reason key (until Unblock).
func (h *Host) BlockReady(key, reason string) {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	if h.blocks == nil {
		h.blocks = map[string]string{}
	}
	h.blocks[key] = reason
}

// UnblockReady clears a reason set with BlockReady.
func (h *Host) UnblockReady(key string) {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	delete(h.blocks, key)
}

// Ready reports whether nothing blocks readiness, and why not.
func (h *Host) Ready() (bool, []string) {
	h.readyMu.Lock()
	defer h.readyMu.Unlock()
	var why []string
	for _, k := range SortedKeys(h.blocks) {
		why = append(why, k+": "+h.blocks[k])
	}
	return len(why) == 0, why
}

// Listener is a long-lived source of runs in serve mode: the HTTP server,
// a cron schedule, a file watcher, an MCP subscription.
type Listener interface {
	Name() string
	// Serve blocks until ctx is cancelled (then drains and returns nil) or
	// the listener fails.
	Serve(ctx context.Context) error
}

// Extension is how a capability family plugs into the process: flags,
// services and serve-mode listeners. Every hook is optional.
type Extension struct {
	Name string // capability family
	// Flags registers the family's command-line flags.
	Flags func(fs *flag.FlagSet)
	// Setup runs after flags are parsed and the program is compiled, before
	// any run: fill Engine.Services, check configuration, fail closed.
	Setup func(ctx context.Context, h *Host) error
	// Listeners returns the family's serve-mode listeners for the program
	// (none when the program declares nothing for this family).
	Listeners func(h *Host) ([]Listener, error)
	// Close releases what Setup acquired (child processes, connections).
	Close func() error
	// Commands are the family's own subcommands (`BIN state migrate`).
	Commands []Command
}

// Command is a family's subcommand. It runs in place of the family's
// Setup, after every other family's Setup (secrets resolved), and exits
// the process: 0 when Run returns nil, else 2 with its error.
type Command struct {
	Name    string // its words, e.g. "state migrate"
	Summary string // one line for -h
	Run     func(ctx context.Context, h *Host, stdout io.Writer) error
}

var (
	extMu      sync.Mutex
	extensions = map[string]Extension{}
)

// RegisterExtension registers a family's process hooks; called from init.
func RegisterExtension(e Extension) {
	extMu.Lock()
	defer extMu.Unlock()
	if _, dup := extensions[e.Name]; dup {
		panic(fmt.Sprintf("kiln: extension %q registered twice", e.Name))
	}
	extensions[e.Name] = e
}

// Extensions returns the registered extensions sorted by name.
func Extensions() []Extension {
	extMu.Lock()
	defer extMu.Unlock()
	out := make([]Extension, 0, len(extensions))
	for _, e := range extensions {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
