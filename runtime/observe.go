package runtime

import (
	"context"

	"github.com/kilnworks/kiln/runtime/workflow"
)

// Observer watches runs and node attempts; the otel family implements it to
// export spans. Each Start returns the context the run or node continues
// with (carrying its span, and a traceparent for outbound calls) and a
// function the engine calls exactly once when the run or attempt ends. Child
// runs (call, parallel, map) start inside their parent node's context.
type Observer interface {
	StartRun(ctx context.Context, r *Run) (context.Context, func(*Outcome))
	StartNode(ctx context.Context, r *Run, n *workflow.Node, attempt int) (context.Context, func(Result, error))
}

// DenialObserver is an Observer that also sees every policy denial the
// engine records (Run.RecordDenial), with the kind it names (a node kind,
// or an agent_loop tool) and the denial: the metrics count them by family.
type DenialObserver interface {
	Denied(r *Run, kind string, err error)
}
