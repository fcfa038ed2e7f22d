package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	mcpspec "github.com/kilnworks/kiln/capabilities/mcp/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

var (
	// Debounce coalesces a burst of notifications for one resource (or of
	// list changes) into one fire, once the burst pauses this long...
	Debounce = 250 * time.Millisecond
	// ...or has lasted this long.
	MaxDelay = time.Second
	// KeepAlive is how often a trigger pings its server, so a lost HTTP
	// session or a hung server is noticed (and restarted) while idle.
	KeepAlive = 30 * time.Second
)

// Listeners returns one listener per mcp.resource.* trigger of the
// program. They need the real pool (not a mock) as the MCP client.
func Listeners(h *runtime.Host) ([]runtime.Listener, error) {
	if pool, ok := mcpclient.ClientFrom(h.Engine.Services).(*Pool); ok {
		metrics.Attach(h).MCPServers(pool.Up) // kiln_mcp_server_up, read at each scrape
	}
	wf := h.Program.Workflow
	var out []runtime.Listener
	for i, t := range wf.Triggers {
		if t.Type != TriggerUpdated && t.Type != TriggerCreated {
			continue
		}
		l, err := NewListener(h, i, t)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// Listener serves one mcp.resource.updated / mcp.resource.created trigger:
// it starts a run per settled notification, one run at a time (a fire
// while the previous run is in flight is skipped and audited).
type Listener struct {
	host   *runtime.Host
	pool   *Pool
	server Server
	trig   workflow.Trigger
	name   string

	slot fire.Slot // the in-flight run
}

// NewListener checks triggers[index] and builds its listener.
func NewListener(h *runtime.Host, index int, t workflow.Trigger) (*Listener, error) {
	where := fmt.Sprintf("triggers[%d] (%s)", index, t.Type)
	if err := spec.Err(mcpspec.CheckTrigger(&t, spec.ForWorkflow(h.Program.Workflow))); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := Validate(h.Program.Workflow); err != nil {
		return nil, err
	}
	name, err := SelectServer(h.Program.Workflow, t.Server)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	if _, err := h.Program.Entry(t.StartNode); err != nil {
		return nil, fmt.Errorf("%s: start_node %q: %v", where, t.StartNode, err)
	}
	pool, _ := mcpclient.ClientFrom(h.Engine.Services).(*Pool)
	if pool == nil {
		return nil, fmt.Errorf("%s: no MCP server pool to subscribe with (declare [[mcp_servers]] or pass --mcp-stdio)", where)
	}
	srv, err := pool.Server(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", where, err)
	}
	return &Listener{host: h, pool: pool, server: srv, trig: t,
		name: fmt.Sprintf("%s[%d] %s %s", t.Type, index, srv.Name, t.Resource)}, nil
}

func (l *Listener) Name() string { return l.name }

// allowed reports whether a notified URI may start a run: it matches the
// trigger's resource pattern and both allowlists (server, then policy).
func (l *Listener) allowed(uri string) error {
	if !policy.Match(l.trig.Resource, uri) {
		return fmt.Errorf("%s does not match resource %q", uri, l.trig.Resource)
	}
	if err := l.server.ResourceAllowed(uri); err != nil {
		return err
	}
	pol := l.host.Engine.Policy
	if pol == nil {
		pol = l.host.Program.Policy
	}
	return pol.MCPResource(l.server.policyServer(), uri)
}

func (l *Listener) audit() *slog.Logger {
	if a := l.host.Engine.Audit; a != nil {
		return a.With("trigger", l.name, "server", l.server.Name)
	}
	return slog.New(slog.DiscardHandler)
}

// Serve subscribes, then fires runs until ctx ends; it then drains the
// in-flight run. It fails when the server cannot serve the trigger (no
// subscribe / listChanged support) or goes down for good.
func (l *Listener) Serve(ctx context.Context) error {
	defer l.drain()
	audit := l.audit()
	// Not ready until the server answers and the subscription holds
	// (/readyz, docs/operations.md).
	ready := "mcp trigger " + l.name
	l.host.BlockReady(ready, "MCP server "+l.server.Name+" not subscribed yet")
	defer l.host.UnblockReady(ready)
	// A shutdown during start-up is not a failure.
	fail := func(format string, args ...any) error {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: "+format, append([]any{l.name}, args...)...)
	}
	notices, stop, err := l.pool.Watch(l.server.Name)
	if err != nil {
		return fail("%v", err)
	}
	defer stop()
	caps, err := l.pool.Capabilities(ctx, l.server.Name)
	if err != nil {
		return fail("%v", err)
	}
	known := map[string]bool{} // created: the resources seen so far
	switch l.trig.Type {
	case TriggerUpdated:
		if caps.Resources == nil || !caps.Resources.Subscribe {
			return fail("server %s does not support resources/subscribe", l.server.Name)
		}
		if err := l.subscribe(ctx, audit); err != nil {
			return fail("%v", err)
		}
	case TriggerCreated:
		if caps.Resources == nil || !caps.Resources.ListChanged {
			return fail("server %s does not send resources/list_changed notifications", l.server.Name)
		}
		uris, err := l.pool.ListResources(ctx, l.server.Name)
		if err != nil {
			return fail("resources/list: %v", err)
		}
		for _, u := range uris {
			known[u] = true
		}
	}
	audit.Info("mcp.trigger.started", "type", l.trig.Type, "resource", l.trig.Resource, "start_node", l.trig.StartNode)
	l.host.UnblockReady(ready)

	// A burst waits to settle per key: a URI (updated) or "" for a
	// re-list (created, and updated when the list changed). It settles
	// after Debounce of quiet, or at the latest after MaxDelay, so a
	// server that never pauses still starts runs.
	bursts := fire.NewDebouncer[string, struct{}](Debounce, MaxDelay, nil)
	defer bursts.Stop()
	ping := time.NewTicker(KeepAlive)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-notices:
			switch {
			case n.Err != nil:
				if ctx.Err() != nil {
					return nil
				}
				audit.Error("mcp.trigger.error", "error", errText(n.Err))
				return fail("%v", n.Err)
			case n.Reconnected:
				audit.Warn("mcp.trigger.reconnected")
				bursts.Note("", nil)
			case n.Method == mcp.MethodNotificationResourcesListChanged:
				bursts.Note("", nil)
			case n.Method == mcp.MethodNotificationResourceUpdated && l.trig.Type == TriggerUpdated:
				if n.URI == "" {
					continue
				}
				if err := l.allowed(n.URI); err != nil {
					audit.Info("mcp.trigger.ignored", "uri", n.URI, "reason", err.Error())
					continue
				}
				bursts.Note(n.URI, nil)
			}
		case <-bursts.C():
			for _, b := range bursts.Settled() {
				l.settled(ctx, audit, b.Key, known)
			}
		case <-ping.C:
			if err := l.pool.Ping(ctx, l.server.Name); err != nil && ctx.Err() == nil {
				audit.Warn("mcp.trigger.error", "error", "ping: "+errText(err))
			}
		}
	}
}

// settled acts on a settled burst: a URI starts a run, a re-list
// resubscribes (updated) or looks for new resources (created).
func (l *Listener) settled(ctx context.Context, audit *slog.Logger, key string, known map[string]bool) {
	switch {
	case key != "":
		l.fire(ctx, key)
	case l.trig.Type == TriggerUpdated:
		if err := l.subscribe(ctx, audit); err != nil {
			audit.Warn("mcp.trigger.error", "error", errText(err))
		}
	default:
		l.created(ctx, audit, known)
	}
}

// subscribe subscribes to the trigger's resources: an exact pattern
// directly (templated resources are not listed), a wildcard one to every
// listed resource it matches that both allowlists admit.
func (l *Listener) subscribe(ctx context.Context, audit *slog.Logger) error {
	var uris []string
	if !strings.Contains(l.trig.Resource, "*") {
		uris = []string{l.trig.Resource}
	} else {
		listed, err := l.pool.ListResources(ctx, l.server.Name)
		if err != nil {
			return fmt.Errorf("resources/list: %v", errText(err))
		}
		uris = listed
	}
	for _, uri := range uris {
		if err := l.allowed(uri); err != nil {
			if policy.Match(l.trig.Resource, uri) {
				audit.Warn("mcp.trigger.denied", "uri", uri, "reason", err.Error())
			}
			continue
		}
		if err := l.pool.Subscribe(ctx, l.server.Name, uri); err != nil {
			return fmt.Errorf("resources/subscribe %s: %v", uri, errText(err))
		}
	}
	return nil
}

// created re-lists the server's resources and fires for each new one the
// trigger admits. One skipped while a run is in flight is not marked
// known, so the next list change offers it again.
func (l *Listener) created(ctx context.Context, audit *slog.Logger, known map[string]bool) {
	uris, err := l.pool.ListResources(ctx, l.server.Name)
	if err != nil {
		audit.Warn("mcp.trigger.error", "error", "resources/list: "+errText(err))
		return
	}
	for _, uri := range uris {
		if known[uri] {
			continue
		}
		if err := l.allowed(uri); err != nil {
			known[uri] = true
			if policy.Match(l.trig.Resource, uri) {
				audit.Warn("mcp.trigger.denied", "uri", uri, "reason", err.Error())
			}
			continue
		}
		if l.fire(ctx, uri) {
			known[uri] = true
		}
	}
}

// fire starts one run unless one is in flight (then it audits the skip
// and returns false). The run does not inherit ctx's cancellation: a
// shutdown drains it (see drain) instead of killing it at once.
func (l *Listener) fire(ctx context.Context, uri string) bool {
	audit := l.audit().With("uri", uri, "start_node", l.trig.StartNode)
	if !l.slot.Claim() {
		metrics.Of(l.host).TriggerSkipped(l.name)
		audit.Warn("mcp.trigger.skipped", "reason", "previous run still in flight")
		return false
	}
	id := runtime.NewExecutionID()
	metrics.Of(l.host).TriggerFired(l.name)
	audit.Info("mcp.trigger.fire", "type", l.trig.Type, "execution_id", id)
	payload := map[string]any{
		"type":   l.trig.Type,
		"server": l.server.Name,
		"uri":    uri,
		// The reference's documented path (trigger.resource_uri).
		"resource_uri": uri,
	}
	l.slot.Go(ctx, func(runCtx context.Context, free func()) {
		rep := l.host.Fire(runCtx, runtime.RunOptions{
			Start:       l.trig.StartNode,
			Trigger:     runtime.MakeTrigger("event", payload),
			ExecutionID: id,
		})
		free()
		o := rep.Outcome
		attrs := []any{"execution_id", id, "status", o.Status, "wall_ms", rep.WallMS}
		switch o.Status {
		case runtime.StatusCompleted, runtime.StatusPaused:
			audit.Info("mcp.trigger.completed", attrs...)
		default:
			audit.Warn("mcp.trigger.error", append(attrs, "reason", o.Reason)...)
		}
	})
	return true
}

// drain waits for the in-flight run; after the host's DrainTimeout (when
// set) it cancels the run and waits for it to stop.
func (l *Listener) drain() {
	l.slot.Drain(l.host.DrainTimeout, func() {
		l.audit().Warn("mcp.trigger.drain_timeout", "detail", "in-flight run cancelled")
	})
}
