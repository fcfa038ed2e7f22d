// Package llm is the intelligence capability family (build tag kiln_llm):
// the llm_infer and agent_loop node kinds, and the process extension that
// connects the `default` backend transport (--intel-unix / --intel-http)
// and the named [[intelligence.backends]] providers.
//
// Every intelligence call checks the run's max_llm_tokens budget before it
// and bills prompt+completion tokens after it; transport failures are
// ClassIntelligence errors (transient, retried under `on = "transient"`),
// answers that are not JSON or fail the output schema are ClassSchema
// (never retried).
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kilnworks/kiln/capabilities/internal/ops/metrics"
	"github.com/kilnworks/kiln/capabilities/llm/intel"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The node kinds of this family. No build registers them from init: a
// generated program registers those its workflow uses, so the others' code
// is left out; RegisterKinds registers them all.
var (
	KindLLMInfer  = runtime.NodeKind{Kind: "llm_infer", Family: "llm", Prepare: prepareInfer, SideEffect: true}
	KindAgentLoop = runtime.NodeKind{Kind: "agent_loop", Family: "llm", Prepare: prepareAgent, SideEffect: true}
)

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindLLMInfer, KindAgentLoop)
}

func init() {
	runtime.RegisterExtension(extension())
}

// complete performs one budgeted intelligence call for node c on backend.
// A response is returned together with a budget error when the call went
// through but spent more than the run's max_llm_tokens.
func complete(ctx context.Context, c *runtime.Call, backend string, msgs []intel.Message, maxTokens int) (*intel.Response, error) {
	if err := c.Run.CheckTokens(); err != nil {
		return nil, onNode(c, err)
	}
	// No static allowlist governs intelligence calls; [policy.rego] may.
	if err := c.Run.Policy().LLMInfer(backend, backendModel(c.Run.Program.Workflow, backend)); err != nil {
		return nil, err
	}
	// The backend name is the wire's logical model name; providers send
	// their configured model instead.
	req := &intel.Request{Model: backend, Messages: msgs, MaxTokens: maxTokens}
	// Through the run's recording/replay seam: a replay answers from its
	// tape and needs no configured backend.
	resp, err := runtime.Interact(ctx, c, "llm.complete", req, func() (*intel.Response, error) {
		backends := intel.ClientFrom(c.Run.Services())
		if backends == nil {
			return nil, c.Errorf(runtime.ClassConfig, "backend %q is not configured: %s", backend, configureHint)
		}
		client, err := backends(backend)
		if err != nil {
			return nil, &runtime.Error{Class: runtime.ClassConfig, Node: c.Node.ID, Kind: c.Node.Type, Msg: err.Error(), Err: err}
		}
		began := time.Now()
		resp, err := client.Complete(ctx, req)
		var prompt, completion int64
		if err == nil && resp != nil {
			prompt, completion = resp.Usage.PromptTokens, resp.Usage.CompletionTokens
		}
		metrics.OfEngine(c.Run.Engine).LLMRequest(backend, time.Since(began), prompt, completion)
		return resp, err
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			return nil, &runtime.Error{Class: runtime.ClassTimeout, Node: c.Node.ID, Kind: c.Node.Type,
				Msg: fmt.Sprintf("backend %q: run deadline reached: %v", backend, err), Err: err}
		}
		var re *runtime.Error
		if errors.As(err, &re) {
			return nil, onNode(c, re)
		}
		return nil, &runtime.Error{Class: runtime.ClassIntelligence, Node: c.Node.ID, Kind: c.Node.Type,
			Msg: fmt.Sprintf("backend %q: %v", backend, err), Err: err}
	}
	if err := c.Run.AddTokens(resp.Usage.PromptTokens + resp.Usage.CompletionTokens); err != nil {
		return resp, onNode(c, err)
	}
	return resp, nil
}

// backendModel is the model a named [[intelligence.backends]] entry sends
// ("" for the default backend, whose transport picks it).
func backendModel(wf *workflow.Workflow, backend string) string {
	if wf.Intelligence != nil {
		for _, b := range wf.Intelligence.Backends {
			if b.Name == backend {
				return b.Model
			}
		}
	}
	return ""
}

const configureHint = "pass --intel-unix PATH or --intel-http URL (or set KILN_INTEL_UNIX / KILN_INTEL_HTTP), or declare the backend in [[intelligence.backends]]"

// onNode fills in the node id and kind of an engine error.
func onNode(c *runtime.Call, err error) error {
	e := runtime.AsError(err)
	if e.Node == "" {
		cp := *e
		cp.Node, cp.Kind = c.Node.ID, c.Node.Type
		return &cp
	}
	return e
}

// tokenUsage is the usage object of node outputs.
func tokenUsage(u intel.Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens}
}
