// Package compose is the composition family: call, parallel and map run
// child workflows on the parent's engine, policy, counters, budgets and
// deadline (runtime.Run.RunChild), one nesting level deeper.
//
// Children are loaded and validated at load time (wf.Children) and compiled
// into Program.Children, so nothing is read from disk at run time. A child
// that completes yields {result}; one that fails or times out yields
// {error} on the "error" branch; an engine error inside a child (policy
// denial, tool error, nested pause, depth cap) aborts the parent run.
package compose

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	composespec "github.com/kilnworks/kiln/capabilities/compose/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// DefaultMaxConcurrent is how many map children run at once when
// max_concurrent is unset.
const DefaultMaxConcurrent = composespec.DefaultMaxConcurrent

// The node kinds of this family. No build registers them from init: a
// generated program registers those its workflow uses, so the others' code
// is left out; RegisterKinds registers them all.
var (
	KindCall     = runtime.NodeKind{Kind: "call", Family: "compose", Prepare: prepareCall, ValueModel: true}
	KindParallel = runtime.NodeKind{Kind: "parallel", Family: "compose", Prepare: prepareParallel, ValueModel: true}
	KindMap      = runtime.NodeKind{Kind: "map", Family: "compose", Prepare: prepareMap, ValueModel: true}
)

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindCall, KindParallel, KindMap)
}

// target is one resolved child: its program and start name.
type target struct {
	path  string
	prog  *runtime.Program
	start string
}

// resolveChild finds the compiled child and checks its start at load time.
func resolveChild(p *runtime.Program, path, start string) (target, error) {
	if path == "" {
		return target{}, fmt.Errorf("workflow is required")
	}
	child, ok := p.Child(path)
	if !ok {
		return target{}, fmt.Errorf("child workflow %q was not loaded with its parent", path)
	}
	if _, err := child.Entry(start); err != nil {
		return target{}, fmt.Errorf("child workflow %q: %v", path, err)
	}
	return target{path: path, prog: child, start: start}, nil
}

// childValue is the {result} / {error} object of one child run. A child
// engine error (errored) is returned as err instead: it aborts the parent.
func childValue(c *runtime.Call, path string, out *runtime.Outcome) (map[string]any, bool, error) {
	switch out.Status {
	case runtime.StatusCompleted:
		return map[string]any{"result": out.FinalValue}, true, nil
	case runtime.StatusFailed:
		return map[string]any{"error": out.Reason}, false, nil
	case runtime.StatusTimedOut:
		return map[string]any{"error": fmt.Sprintf("child workflow %s timed out after %d ms", path, out.ElapsedMS)}, false, nil
	}
	// Keep the child's class (budget, capability, ...) except policy: the
	// child already counted and audited its denial, and the engine would
	// count it again for the parent.
	class := runtime.ClassWorkflow
	if out.Err != nil && out.Err.Class != runtime.ClassPolicy {
		class = out.Err.Class
	}
	// The cause is not wrapped: the engine would unwrap a policy denial
	// from it and count it a second time.
	e := c.Errorf(class, "child workflow %s: %s", path, out.Reason)
	if out.Err != nil {
		e.Target = out.Err.Target
	}
	return nil, false, e
}

func prepareCall(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(composespec.CheckCall(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	t, err := resolveChild(p, n.Workflow, n.Start)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		out := c.Run.RunOneChild(ctx, runtime.ChildJob{Program: t.prog, Start: t.start, Input: inputOf(c, c.Node.InputFrom)})
		if err := deadline(ctx, c); err != nil {
			return runtime.Result{}, err
		}
		if out.Status == "" { // the run ended before the child started
			return runtime.Result{}, c.Errorf(runtime.ClassTimeout, "run deadline reached before child workflow %s started", t.path)
		}
		v, ok, err := childValue(c, t.path, &out)
		if err != nil {
			return runtime.Result{}, err
		}
		if !ok {
			return runtime.NextBranch(v, "error"), nil
		}
		return runtime.Next(v), nil
	}, nil
}

// inputOf resolves a child's trigger input: input_from when set, else the
// parent's trigger payload. RunChild copies an object input into the
// child's own trigger and sets its kind (the parent's kind), so the
// parent's trigger itself is that payload: children share nothing mutable.
func inputOf(c *runtime.Call, from string) any {
	if from != "" {
		return c.From(from)
	}
	return c.Run.Trigger()
}

func prepareParallel(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(composespec.CheckParallel(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	targets := make([]target, len(n.Branches))
	for i, b := range n.Branches {
		t, err := resolveChild(p, b.Workflow, b.Start)
		if err != nil {
			return nil, fmt.Errorf("branches[%d]: %v", i, err)
		}
		targets[i] = t
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		// Inputs are resolved before any goroutine starts, once for
		// consecutive branches that name the same input_from (fanning one
		// value out to several workflows is the common case): a lookup
		// returns the same value each time, which no child can change.
		jobs := make([]runtime.ChildJob, len(targets))
		var in any
		for i, t := range targets {
			if from := c.Node.Branches[i].InputFrom; i == 0 || from != c.Node.Branches[i-1].InputFrom {
				in = inputOf(c, from)
			}
			jobs[i] = runtime.ChildJob{Program: t.prog, Start: t.start, Input: in}
		}
		return fanOut(ctx, c, len(jobs), func(i int) runtime.ChildJob { return jobs[i] },
			func(i int) string { return targets[i].path }, len(jobs))
	}, nil
}

func prepareMap(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(composespec.CheckMap(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	t, err := resolveChild(p, n.Workflow, n.Start)
	if err != nil {
		return nil, err
	}
	maxItems := *n.MaxItems
	wave := DefaultMaxConcurrent
	if n.MaxConcurrent != nil {
		wave = *n.MaxConcurrent
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		v, found := c.Lookup(c.Node.ItemsFrom)
		items, ok := v.([]any)
		if !ok {
			what := "nothing"
			if found {
				what = runtime.TypeName(v)
			}
			return runtime.Result{}, c.Errorf(runtime.ClassWorkflow,
				"items_from %q must resolve to a JSON array, got %s", c.Node.ItemsFrom, what)
		}
		if len(items) > maxItems {
			return runtime.Result{}, c.Errorf(runtime.ClassWorkflow,
				"%d items exceed max_items = %d; raise max_items deliberately or shrink the input (map never truncates)",
				len(items), maxItems)
		}
		job := func(i int) runtime.ChildJob {
			return runtime.ChildJob{Program: t.prog, Start: t.start, Input: items[i]}
		}
		return fanOut(ctx, c, len(items), job, func(int) string { return t.path }, wave)
	}, nil
}

// fanOut runs n jobs on at most wave goroutines at once (Run.RunChildren)
// and joins the results in job order: {results:[{result}|{error}], ok},
// branch "error" when any child did not complete. A child engine error
// stops further children from starting; the first one in job order aborts
// the parent once the running children have finished. path(i) is the
// workflow path of job i, for messages.
func fanOut(ctx context.Context, c *runtime.Call, n int, job func(int) runtime.ChildJob, path func(int) string, wave int) (runtime.Result, error) {
	// Each child's value is built as it ends, on the goroutine that ran
	// it, into its own slot: a child's engine error sits in its slot
	// until the join, which returns before the results are seen; a slot
	// left nil is a job that did not start.
	results := make([]any, n)
	var notOK atomic.Bool
	c.Run.RunChildren(ctx, n, wave, job, func(i int, out *runtime.Outcome) {
		v, ok, err := childValue(c, path(i), out)
		switch {
		case err != nil:
			results[i] = err
		case !ok:
			notOK.Store(true)
			fallthrough
		default:
			results[i] = v
		}
	})
	if err := deadline(ctx, c); err != nil {
		started := 0
		for _, v := range results {
			if v != nil {
				started++
			}
		}
		if started < n {
			return runtime.Result{}, c.Errorf(runtime.ClassTimeout, "run deadline reached after %d of %d children", started, n)
		}
		return runtime.Result{}, err
	}
	for i, v := range results {
		// Jobs start in order and stop after an engine error, which is
		// returned here before any job that did not start.
		switch v := v.(type) {
		case nil:
			return runtime.Result{}, c.Errorf(runtime.ClassTimeout, "run deadline reached after %d of %d children", i, n)
		case error:
			return runtime.Result{}, v
		}
	}
	val := map[string]any{"results": results, "ok": !notOK.Load()}
	if notOK.Load() {
		return runtime.NextBranch(val, "error"), nil
	}
	return runtime.Next(val), nil
}

// deadline turns the shared run deadline passing during the children into
// a timeout of the parent, so a dead-end after the node cannot report it
// as completed.
func deadline(ctx context.Context, c *runtime.Call) error {
	now := time.Now
	if c.Run.Engine.Now != nil {
		now = c.Run.Engine.Now
	}
	// The context's timer may lag the wall clock the engine checks.
	passed := !c.Run.Deadline.IsZero() && !now().Before(c.Run.Deadline)
	if ctx.Err() == nil && !passed {
		return nil
	}
	return c.Errorf(runtime.ClassTimeout, "run deadline reached while child workflows ran")
}
