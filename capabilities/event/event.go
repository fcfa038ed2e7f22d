// Package event is the internal-event family: the emit_event node fires
// the [[triggers]] entries of type "internal.event" whose name matches, and
// each such trigger is a serve-mode listener that runs its start node, one
// run at a time (an event while the previous run is in flight is skipped
// and audited as event.skipped).
//
// Delivery is asynchronous: emit_event returns once the triggered run has
// started. Events only reach listeners that are serving; in one-shot mode
// (or while a trigger is busy) emit_event reports delivered = false and the
// drop is audited. An event chain (a triggered run emitting again) is
// bounded to runtime.MaxCallDepth hops. The triggered run's
// trigger.principal is the emitting run's, never one from the payload.
package event

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	eventspec "github.com/kilnworks/kiln/capabilities/event/spec"
	"github.com/kilnworks/kiln/capabilities/internal/fire"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// TriggerType is the [[triggers]] type this family serves.
const TriggerType = eventspec.TriggerType

// ErrNotDelivered is returned by Services.Emit when the event is declared
// but no run started: no listener is serving, or every one is busy.
var ErrNotDelivered = errors.New("event not delivered")

// KindEmitEvent is the node kind of this family. No build registers it from
// init: a generated program registers it when its workflow uses it, and
// RegisterKinds registers it for binaries that link the whole family.
var KindEmitEvent = runtime.NodeKind{Kind: "emit_event", Family: "event", Prepare: prepare, SideEffect: true}

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindEmitEvent)
}

func init() {
	runtime.RegisterExtension(runtime.Extension{
		Name:      "event",
		Setup:     setup,
		Listeners: listeners,
	})
}

type busKey struct{}

type hopsKey struct{}

// principalKey carries the emitting run's trigger.principal to the runs
// an event starts: a principal inside the payload is dropped, so an event
// payload (often built from a request body) cannot spoof one.
type principalKey struct{}

// bus routes emitted events to the host's internal.event listeners.
type bus struct {
	host     *runtime.Host
	declared map[string]bool

	mu   sync.Mutex
	subs map[string][]*fire.Gate // serving listeners by event name
}

// install creates the host's bus and points Services.Emit at it.
func install(h *runtime.Host) *bus {
	if h.Engine.Services == nil {
		h.Engine.Services = &runtime.Services{}
	}
	s := h.Engine.Services
	if v, ok := s.Values.Load(busKey{}); ok {
		return v.(*bus)
	}
	b := &bus{host: h, declared: map[string]bool{}, subs: map[string][]*fire.Gate{}}
	for _, t := range h.Program.Workflow.Triggers {
		if t.Type == TriggerType {
			b.declared[t.Name] = true
		}
	}
	s.Values.Store(busKey{}, b)
	s.Emit = b.emit
	return b
}

func setup(ctx context.Context, h *runtime.Host) error {
	if err := spec.TriggerErr(h.Program.Workflow, TriggerType, eventspec.CheckTrigger); err != nil {
		return err
	}
	install(h)
	return nil
}

// emit starts a run on every serving listener of event.
func (b *bus) emit(ctx context.Context, event string, payload any) error {
	if !b.declared[event] {
		return fmt.Errorf("no [[triggers]] entry of type %s is named %q", TriggerType, event)
	}
	hops, _ := ctx.Value(hopsKey{}).(int)
	hops++
	if hops > runtime.MaxCallDepth {
		return fmt.Errorf("event chain longer than %d hops (an event-triggered run emitting again)", runtime.MaxCallDepth)
	}
	b.mu.Lock()
	gates := append([]*fire.Gate(nil), b.subs[event]...)
	b.mu.Unlock()
	audit := b.host.Engine.Audit
	if len(gates) == 0 {
		if audit != nil {
			audit.Warn("event.dropped", "event", event, "reason", "no internal.event listener is serving (one-shot mode?)")
		}
		return fmt.Errorf("%w: no listener for %q is serving", ErrNotDelivered, event)
	}
	started := 0
	for _, g := range gates {
		p := map[string]any{}
		switch v := payload.(type) {
		case map[string]any:
			for k, x := range v {
				p[k] = x
			}
		case nil:
		default:
			p["input"] = v
		}
		// Set after the payload's own fields, so it cannot spoof them.
		delete(p, "principal")
		if pr := ctx.Value(principalKey{}); pr != nil {
			p["principal"] = pr
		}
		p["type"] = TriggerType
		p["event"] = event
		p["hops"] = hops
		p["fired_at_unix_ms"] = time.Now().UnixMilli()
		p["tick"] = g.NextTick()
		if g.Fire(context.WithValue(ctx, hopsKey{}, hops), p) {
			started++
		}
	}
	if started == 0 {
		return fmt.Errorf("%w: every listener for %q is busy", ErrNotDelivered, event)
	}
	return nil
}

func listeners(h *runtime.Host) ([]runtime.Listener, error) {
	b := install(h)
	var out []runtime.Listener
	for i, t := range h.Program.Workflow.Triggers {
		if t.Type != TriggerType {
			continue
		}
		if t.Name == "" {
			return nil, fmt.Errorf("triggers[%d] (%s): name is required", i, TriggerType)
		}
		if _, err := h.Program.Entry(t.StartNode); err != nil {
			return nil, fmt.Errorf("triggers[%d] (%s): start_node %q: %v", i, TriggerType, t.StartNode, err)
		}
		out = append(out, &listener{bus: b, event: t.Name, gate: &fire.Gate{
			Host: h, Prefix: "event", Name: fmt.Sprintf("%s[%d] %s", TriggerType, i, t.Name), StartNode: t.StartNode,
		}})
	}
	return out, nil
}

type listener struct {
	bus   *bus
	event string
	gate  *fire.Gate
}

func (l *listener) Name() string { return l.gate.Name }

// Serve subscribes until ctx ends, then waits for the in-flight run.
func (l *listener) Serve(ctx context.Context) error {
	b := l.bus
	b.mu.Lock()
	b.subs[l.event] = append(b.subs[l.event], l.gate)
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	gates := b.subs[l.event]
	for i, g := range gates {
		if g == l.gate {
			b.subs[l.event] = append(gates[:i:i], gates[i+1:]...)
			break
		}
	}
	b.mu.Unlock()
	l.gate.Wait()
	return nil
}

func prepare(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(eventspec.CheckEmitEvent(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		event := c.Node.Event
		payload := c.From(c.Node.PayloadFrom)
		if c.DryRun() {
			return runtime.Next(map[string]any{"event": event, "dry_run": true}), nil
		}
		// Through the run's recording/replay seam: a replay answers from
		// its tape and starts no run.
		req := map[string]any{"event": event, "payload": payload}
		return runtime.Interact(ctx, c, "event.emit", req, func() (runtime.Result, error) {
			emit := c.Run.Services().Emit
			if emit == nil {
				return runtime.Result{}, c.Errorf(runtime.ClassCapability, "internal events are not available in this process (the event family is not set up)")
			}
			// A run started by an event carries its hop count in ctx (set by
			// the bus, not by the payload), so chains stay bounded.
			if pr, ok := c.Run.Trigger()["principal"]; ok {
				ctx = context.WithValue(ctx, principalKey{}, pr)
			}
			err := emit(ctx, event, payload)
			switch {
			case err == nil:
				return runtime.Next(map[string]any{"event": event, "delivered": true}), nil
			case errors.Is(err, ErrNotDelivered):
				return runtime.Next(map[string]any{"event": event, "delivered": false, "reason": err.Error()}), nil
			}
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "emit %q: %v", event, err)
		})
	}, nil
}
