package llm

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	llmspec "github.com/kilnworks/kiln/capabilities/llm/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// maxSchemaInRepair bounds how much schema text a repair message quotes.
const maxSchemaInRepair = 8 << 10

// inferNode is a prepared llm_infer node.
type inferNode struct {
	backend   string
	prompt    string
	schema    *outputSchema // nil: no output_schema, content is free text
	repairs   int
	maxTokens int // per-call completion cap; 0: the backend's
}

func prepareInfer(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(llmspec.CheckInfer(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	in := &inferNode{backend: n.Backend, prompt: n.Prompt}
	if n.PromptFile != "" {
		data := p.Workflow.Assets[n.PromptFile] // present: checked above
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("prompt_file %q is not UTF-8 text", n.PromptFile)
		}
		in.prompt = string(data)
	}
	if n.OutputRepairs != nil {
		in.repairs = *n.OutputRepairs
	}
	if n.MaxTokens != nil {
		in.maxTokens = *n.MaxTokens
	}
	if n.OutputSchema != "" {
		s, err := compileSchema(n.OutputSchema, p.Workflow.Assets)
		if err != nil {
			return nil, err
		}
		in.schema = s
	}
	return in.run, nil
}

func (in *inferNode) run(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
	if c.DryRun() {
		return runtime.Next(map[string]any{"content": "<dry-run>", "dry_run": true}), nil
	}
	prompt := runtime.Render(in.prompt, c.From(c.Node.InputFrom), c.Run)
	msgs := []intel.Message{{Role: "user", Content: prompt}}
	var usage intel.Usage
	for attempt := 1; ; attempt++ {
		resp, err := complete(ctx, c, in.backend, msgs, in.maxTokens)
		if resp != nil {
			usage.PromptTokens += resp.Usage.PromptTokens
			usage.CompletionTokens += resp.Usage.CompletionTokens
		}
		if err != nil {
			return runtime.Result{}, err
		}
		out := map[string]any{"content": resp.Content, "parsed": nil, "usage": tokenUsage(usage)}
		if in.schema == nil {
			return runtime.Next(out), nil
		}
		parsed, aerr := in.schema.check(resp.Content)
		if aerr == nil {
			out["parsed"] = parsed
			return runtime.Next(out), nil
		}
		if attempt > in.repairs {
			return runtime.Result{}, c.Errorf(runtime.ClassSchema, "%s (after %d attempt(s), output_repairs = %d)", aerr, attempt, in.repairs)
		}
		c.Run.Audit().Warn("llm_infer.repair", "node", c.Node.ID, "kind", c.Node.Type, "attempt", attempt,
			"repairs", in.repairs, "error", aerr.Error())
		msgs = append(msgs,
			intel.Message{Role: "assistant", Content: resp.Content},
			intel.Message{Role: "user", Content: in.repairMessage(aerr)})
	}
}

// repairMessage is the corrective turn after a rejected answer.
func (in *inferNode) repairMessage(aerr *answerError) string {
	msg := "Your previous answer was rejected: " + aerr.Error() + ".\n"
	if in.schema.source != "" && len(in.schema.source) <= maxSchemaInRepair {
		msg += "The answer must be JSON that validates against this JSON Schema:\n" + in.schema.source + "\n"
	}
	return msg + "Reply again with only the corrected JSON value: no prose, no code fences."
}
