package otel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Span attribute keys. Spans carry identifiers, statuses and (redacted)
// reasons only: never node inputs, outputs or trigger payloads, which may
// hold secrets.
const (
	AttrWorkflow    = "kiln.workflow"
	AttrExecutionID = "kiln.execution_id"
	AttrStartNode   = "kiln.start_node"
	AttrTriggerKind = "kiln.trigger.kind"
	AttrDryRun      = "kiln.dry_run"
	AttrDepth       = "kiln.depth"
	AttrStatus      = "kiln.status"
	AttrReason      = "kiln.reason"
	AttrLastNode    = "kiln.last_node"
	AttrErrorClass  = "kiln.error.class"
	AttrNodeID      = "kiln.node.id"
	AttrNodeKind    = "kiln.node.kind"
	AttrNodeAttempt = "kiln.node.attempt"
	AttrNodeBranch  = "kiln.node.branch"
	AttrNodeAction  = "kiln.node.action"
)

// traceContext reads and writes W3C traceparent headers.
var traceContext propagation.TraceContext

// observer turns the engine's run and node-attempt hooks into spans: one
// span per run, named after the workflow, and one child span per node
// attempt, named after the node. A child run (call, parallel, map) starts
// inside its node's context, so its span is that node span's child.
type observer struct {
	tracer      trace.Tracer
	omitReasons bool
}

// StartRun opens the run span. Its parent is an OTel span already on ctx
// (a child run), else the caller's traceparent the HTTP server put on ctx,
// else a valid trigger.traceparent (what http_request would forward).
func (o *observer) StartRun(ctx context.Context, r *runtime.Run) (context.Context, func(*runtime.Outcome)) {
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() {
		tp := runtime.Traceparent(ctx)
		if tp == "" {
			if t, ok := r.Trigger()["traceparent"].(string); ok && runtime.ValidTraceparent(t) {
				tp = t
			}
		}
		if tp != "" {
			parent = traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
		}
	}
	name := r.Program.Workflow.Name
	attrs := []attribute.KeyValue{
		attribute.String(AttrWorkflow, name),
		attribute.String(AttrExecutionID, r.ID()),
		attribute.Bool(AttrDryRun, r.DryRun),
		attribute.Int(AttrDepth, r.Depth),
	}
	if r.StartNode != "" {
		attrs = append(attrs, attribute.String(AttrStartNode, r.StartNode))
	}
	if kind, _ := r.Trigger()["kind"].(string); kind != "" {
		attrs = append(attrs, attribute.String(AttrTriggerKind, kind))
	}
	ctx, span := o.tracer.Start(parent, name, trace.WithAttributes(attrs...))
	return withTraceparent(ctx), func(out *runtime.Outcome) {
		o.endRun(span, out)
	}
}

func (o *observer) endRun(span trace.Span, out *runtime.Outcome) {
	defer span.End()
	if out == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(AttrStatus, out.Status))
	if out.LastNode != "" {
		span.SetAttributes(attribute.String(AttrLastNode, out.LastNode))
	}
	if out.Err != nil {
		span.SetAttributes(attribute.String(AttrErrorClass, string(out.Err.Class)))
	}
	reason := ""
	if out.Reason != "" && !o.omitReasons {
		reason = runtime.Redact(out.Reason)
		span.SetAttributes(attribute.String(AttrReason, reason))
	}
	switch out.Status {
	case runtime.StatusFailed, runtime.StatusErrored, runtime.StatusTimedOut:
		if reason == "" {
			reason = "run " + out.Status
		}
		span.SetStatus(codes.Error, reason)
	}
}

// StartNode opens the span of one node attempt and makes it the outbound
// traceparent of the node's context, so http_request propagates it.
func (o *observer) StartNode(ctx context.Context, r *runtime.Run, n *workflow.Node, attempt int) (context.Context, func(runtime.Result, error)) {
	ctx, span := o.tracer.Start(ctx, n.ID, trace.WithAttributes(
		attribute.String(AttrNodeID, n.ID),
		attribute.String(AttrNodeKind, n.Type),
		attribute.Int(AttrNodeAttempt, attempt),
	))
	return withTraceparent(ctx), func(res runtime.Result, err error) {
		o.endNode(span, r.Program.Workflow, n, res, err)
	}
}

func (o *observer) endNode(span trace.Span, wf *workflow.Workflow, n *workflow.Node, res runtime.Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		class := string(runtime.ClassOf(err))
		span.SetAttributes(attribute.String(AttrErrorClass, class))
		desc := class + " error"
		if !o.omitReasons {
			desc = runtime.Redact(err.Error())
		}
		span.SetStatus(codes.Error, desc)
		return
	}
	span.SetAttributes(attribute.String(AttrNodeAction, res.Action.String()))
	if res.Branch != "" && declaredBranch(wf, n.ID, res.Branch) {
		// A branch can be data (a switch on a value): spans are a sink.
		span.SetAttributes(attribute.String(AttrNodeBranch, runtime.Redact(res.Branch)))
	}
}

// declaredBranch reports whether branch is the `when` of one of node's
// out-edges. A switch's branch is the value it switched on, which may be
// data; only a branch the workflow file itself names goes into a span.
func declaredBranch(wf *workflow.Workflow, node, branch string) bool {
	for i := range wf.Edges {
		if e := &wf.Edges[i]; e.From == node && e.When == branch {
			return true
		}
	}
	return false
}

// withTraceparent puts the span on ctx as the W3C traceparent outbound
// calls forward (sampled or not: the callee follows the flag).
func withTraceparent(ctx context.Context) context.Context {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return runtime.WithTraceparent(ctx, carrier["traceparent"])
}
