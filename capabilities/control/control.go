// Package control is the capability family of the traversal nodes:
// condition, switch, merge, fail, terminate, respond and pause_for_approval
// (docs/reference.md). They have no side effects and need no policy;
// dry-run runs them normally.
package control

import (
	"context"
	"encoding/json"
	"strconv"

	controlspec "github.com/kilnworks/kiln/capabilities/control/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// Family is the capability family id of this package.
const Family = "control"

// The node kinds of this family. No build registers them from init: a
// generated program registers those its workflow uses, so the others' code
// is left out; RegisterKinds registers them all.
var (
	KindCondition        = runtime.NodeKind{Kind: "condition", Family: Family, Prepare: prepareCondition, ValueModel: true, NoWait: true}
	KindSwitch           = runtime.NodeKind{Kind: "switch", Family: Family, Prepare: prepareSwitch, ValueModel: true, NoWait: true}
	KindMerge            = runtime.NodeKind{Kind: "merge", Family: Family, Prepare: prepareMerge, ValueModel: true, NoWait: true}
	KindFail             = runtime.NodeKind{Kind: "fail", Family: Family, Prepare: prepareFail, ValueModel: true, NoWait: true}
	KindTerminate        = runtime.NodeKind{Kind: "terminate", Family: Family, Prepare: prepareTerminate, ValueModel: true, NoWait: true}
	KindRespond          = runtime.NodeKind{Kind: "respond", Family: Family, Prepare: prepareRespond, ValueModel: true, NoWait: true}
	KindPauseForApproval = runtime.NodeKind{Kind: "pause_for_approval", Family: Family, Prepare: preparePause, ValueModel: true}
)

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindCondition, KindSwitch, KindMerge, KindFail, KindTerminate, KindRespond, KindPauseForApproval)
}

// condition: {value} on branch "true" or "false" by JSON truthiness.
func prepareCondition(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(controlspec.CheckExpr(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	expr := n.Expr
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		v := c.From(expr)
		branch := "false"
		if runtime.Truthy(v) {
			branch = "true"
		}
		return runtime.NextBranch(map[string]any{"value": v}, branch), nil
	}, nil
}

// switch: {value} on the branch named by the value's string form.
func prepareSwitch(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(controlspec.CheckExpr(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	expr := n.Expr
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		v := c.From(expr)
		return runtime.NextBranch(map[string]any{"value": v}, runtime.SwitchLabel(v)), nil
	}, nil
}

// merge: a pass-through join; its output is null.
func prepareMerge(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) {
	return func(context.Context, *runtime.Call) (runtime.Result, error) {
		return runtime.Next(nil), nil
	}, nil
}

// fail: the run ends Failed with the declared reason.
func prepareFail(n *workflow.Node, _ *runtime.Program) (runtime.NodeFunc, error) {
	reason := n.Reason
	if reason == "" {
		reason = "workflow failed"
	}
	return func(context.Context, *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Fail, Reason: reason}, nil
	}, nil
}

// terminate: the run ends Completed with final_value null.
func prepareTerminate(*workflow.Node, *runtime.Program) (runtime.NodeFunc, error) {
	return func(context.Context, *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Terminate}, nil
	}, nil
}

// pause_for_approval: the engine writes a checkpoint (needs a state
// directory) and the run ends Paused.
func preparePause(n *workflow.Node, _ *runtime.Program) (runtime.NodeFunc, error) {
	reason := n.Reason
	return func(context.Context, *runtime.Call) (runtime.Result, error) {
		return runtime.Result{Action: runtime.Pause, Reason: reason}, nil
	}, nil
}

// respond: declares the HTTP reply of the run; the last respond on the path
// wins. The body template renders against input_from, else the trigger.
func prepareRespond(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(controlspec.CheckRespond(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	status := 200
	if n.Status != nil {
		status = *n.Status
	}
	contentType := n.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	tmpl, inputFrom := runtime.ParseTemplate(n.BodyTemplate), n.InputFrom
	// The output is built in the engine's value model (json.Number), so it
	// needs no normalising copy; its constant values are boxed once, here.
	var statusValue, contentTypeValue any = json.Number(strconv.Itoa(status)), contentType
	return func(_ context.Context, c *runtime.Call) (runtime.Result, error) {
		var input any = c.Run.Trigger()
		if inputFrom != "" {
			input = c.From(inputFrom)
		}
		body := tmpl.Render(input, c.Run)
		return runtime.Result{
			Value: map[string]any{"status": statusValue, "content_type": contentTypeValue,
				"bytes": json.Number(strconv.Itoa(len(body)))},
			Respond: &runtime.HTTPResponse{Status: status, ContentType: contentType, Body: body},
		}, nil
	}, nil
}
