package llm

// agent_loop is a bounded ReAct loop inside one node (docs/agent_loop.md).
//
// The protocol the model is told (see docs/agent_loop.md): every reply is
// exactly one JSON object, either
//
//	{"tool": "<name>", "args": {...}}   call one of the node's declared tools
//	{"final": <any JSON>}               finish; the value becomes `result`
//
// (a single surrounding ``` code fence is tolerated). After a tool call the
// next user message is the observation, a JSON object:
//
//	{"tool": "read_file", "ok": true, "output": {...}[, "branch": "error"]}
//	{"tool": "read_file", "ok": false, "denied": "fs.read denied on ..."}
//	{"tool": "read_file", "ok": false, "error": "..."}
//
// Tools run through the registered handler of the node kind of the same
// name (a synthetic node whose *_from paths read the model's args), so the
// policy, dry-run, deadline and budgets are exactly those of a declared
// node. A policy denial does not abort the run: it is counted and audited
// (policy.denied) and fed back to the model. Timeouts and exhausted
// budgets do abort it. Each model reply is one step; after max_steps
// replies without a final answer (or once the loop has spent max_tokens),
// the node continues on branch "exhausted" with result null.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/kilnworks/kiln/capabilities/llm/intel"
	llmspec "github.com/kilnworks/kiln/capabilities/llm/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	// maxObservation bounds one observation as sent to the model.
	maxObservation = 16 << 10
	// BranchExhausted is the branch taken when the loop runs out of steps.
	BranchExhausted = llmspec.BranchExhausted
)

// agentTool describes one tool to the model and builds its synthetic node
// from the model's args. Paths read the args through Call.Scope {"args": args}.
type agentTool struct {
	usage string
	node  func(args map[string]any) (workflow.Node, error)
}

var agentTools = map[string]agentTool{
	"read_file": {`{"path": string} - read a UTF-8 file`, func(a map[string]any) (workflow.Node, error) {
		return workflow.Node{PathFrom: "args.path"}, nil
	}},
	"write_file": {`{"path": string, "content": any} - write a file (non-strings are JSON-encoded; parents created)`, func(a map[string]any) (workflow.Node, error) {
		return workflow.Node{PathFrom: "args.path", ContentFrom: "args.content"}, nil
	}},
	"read_env": {`{"key": string} - read an environment variable`, func(a map[string]any) (workflow.Node, error) {
		key, err := stringArg(a, "key", true)
		return workflow.Node{Key: key}, err
	}},
	"http_request": {`{"method": string, "url": string, "body"?: any} - send an HTTP request (no custom headers)`, func(a map[string]any) (workflow.Node, error) {
		method, err := stringArg(a, "method", false)
		if method == "" {
			method = "GET"
		}
		// No headers: a model must not be able to ask for secret injection.
		n := workflow.Node{Method: strings.ToUpper(method), URLFrom: "args.url"}
		if _, ok := a["body"]; ok {
			n.BodyFrom = "args.body"
		}
		return n, err
	}},
	"shell_run": {`{"command": absolute path, "args"?: [string]} - run a program directly, without a shell`, func(a map[string]any) (workflow.Node, error) {
		cmd, err := stringArg(a, "command", true)
		n := workflow.Node{Command: cmd}
		if _, ok := a["args"]; ok {
			n.ArgsFrom = "args.args"
		}
		return n, err
	}},
	"call_mcp_tool": {`{"tool": string, "server"?: string, "args"?: object} - call an MCP tool`, func(a map[string]any) (workflow.Node, error) {
		tool, err := stringArg(a, "tool", true)
		if err != nil {
			return workflow.Node{}, err
		}
		server, err := stringArg(a, "server", false)
		n := workflow.Node{Tool: tool, Server: server}
		if _, ok := a["args"]; ok {
			n.ArgsFrom = "args.args"
		}
		return n, err
	}},
}

func stringArg(a map[string]any, key string, required bool) (string, error) {
	v, ok := a[key]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("args.%s is required", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok || (required && s == "") {
		return "", fmt.Errorf("args.%s must be a non-empty string", key)
	}
	return s, nil
}

// agentNode is a prepared agent_loop node.
type agentNode struct {
	backend          string
	maxSteps         int
	maxTokens        int64 // 0: only the run's budget applies
	tools            []string
	instructions     string
	instructionsFrom string
	system           string
}

func prepareAgent(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(llmspec.CheckAgentLoop(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	a := &agentNode{backend: n.Backend, maxSteps: *n.MaxSteps, instructions: n.Instructions, instructionsFrom: n.InstructionsFrom}
	if n.MaxTokens != nil {
		a.maxTokens = int64(*n.MaxTokens)
	}
	for _, t := range n.Tools {
		if _, ok := agentTools[t]; !ok {
			return nil, fmt.Errorf("tool %q has no synthetic node in this family (capabilities/llm/spec.AgentTools and agentTools disagree)", t)
		}
		if _, ok := runtime.LookupNode(t); !ok {
			return nil, fmt.Errorf("tool %q needs the %s node kind, which is not compiled into this binary", t, t)
		}
		a.tools = append(a.tools, t)
	}
	a.system = a.systemPrompt()
	return a.run, nil
}

func (a *agentNode) systemPrompt() string {
	var b strings.Builder
	b.WriteString("You are a bounded agent running one step of a workflow. You may call these tools, one per reply:\n")
	for _, t := range a.tools {
		fmt.Fprintf(&b, "- %s %s\n", t, agentTools[t].usage)
	}
	b.WriteString("Every reply must be exactly one JSON object and nothing else:\n")
	b.WriteString(`  {"tool": "<name>", "args": {...}} to call a tool; the next message is its observation` + "\n")
	b.WriteString(`  {"final": <any JSON>} to finish with your answer` + "\n")
	fmt.Fprintf(&b, "You have at most %d replies. A policy may deny a tool call; the denial comes back as an observation and cannot be overridden.\n", a.maxSteps)
	return b.String()
}

func (a *agentNode) run(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
	if c.DryRun() {
		return runtime.Next(map[string]any{"result": "<dry-run>", "steps": 0, "tokens": 0,
			"transcript": []any{}, "dry_run": true}), nil
	}
	var instructions string
	if a.instructionsFrom != "" {
		v := c.From(a.instructionsFrom)
		if v == nil {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "instructions_from %q resolved to nothing", a.instructionsFrom)
		}
		instructions = runtime.AsString(v)
	} else {
		instructions = runtime.Render(a.instructions, nil, c.Run)
	}
	msgs := []intel.Message{{Role: "system", Content: a.system}, {Role: "user", Content: instructions}}
	transcript := []any{}
	var tokens int64
	output := func(result any, steps int) map[string]any {
		return map[string]any{"result": result, "steps": steps, "tokens": tokens, "transcript": transcript}
	}
	for step := 1; step <= a.maxSteps; step++ {
		if a.maxTokens > 0 && tokens >= a.maxTokens {
			c.Run.Audit().Info("agent_loop.exhausted", "node", c.Node.ID, "steps", step-1, "tokens", tokens, "why", "max_tokens")
			return runtime.NextBranch(output(nil, step-1), BranchExhausted), nil
		}
		resp, err := complete(ctx, c, a.backend, msgs, 0)
		if resp != nil {
			tokens += resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
		if err != nil {
			return runtime.Result{}, err
		}
		entry := map[string]any{"step": step, "reply": resp.Content}
		transcript = append(transcript, entry)
		msgs = append(msgs, intel.Message{Role: "assistant", Content: resp.Content})

		tool, args, final, perr := parseReply(resp.Content)
		if tool != "" {
			entry["tool"], entry["args"] = tool, args
		}
		var obs map[string]any
		switch {
		case perr != nil:
			obs = map[string]any{"ok": false, "error": perr.Error()}
		case tool == "":
			entry["final"] = final
			return runtime.Next(output(final, step)), nil
		case !slices.Contains(a.tools, tool):
			c.Run.Audit().Warn("agent_loop.tool_refused", "node", c.Node.ID, "kind", c.Node.Type, "tool", tool)
			obs = map[string]any{"tool": tool, "ok": false,
				"error": fmt.Sprintf("tool %q is not available here; available: %s", tool, strings.Join(a.tools, ", "))}
		default:
			obs, err = a.callTool(ctx, c, tool, args)
			if err != nil {
				return runtime.Result{}, err
			}
		}
		entry["observation"] = obs
		msgs = append(msgs, intel.Message{Role: "user", Content: observationText(obs)})
	}
	c.Run.Audit().Info("agent_loop.exhausted", "node", c.Node.ID, "steps", a.maxSteps, "tokens", tokens, "why", "max_steps")
	return runtime.NextBranch(output(nil, a.maxSteps), BranchExhausted), nil
}

// callTool runs one tool through its node kind's registered handler. The
// returned error aborts the run (deadline, budget); everything else,
// denials included, becomes the observation.
func (a *agentNode) callTool(ctx context.Context, c *runtime.Call, tool string, args map[string]any) (map[string]any, error) {
	obs := map[string]any{"tool": tool, "ok": false}
	syn, err := agentTools[tool].node(args)
	if err != nil {
		obs["error"] = err.Error()
		return obs, nil
	}
	syn.ID, syn.Type = c.Node.ID, tool
	kind, _ := runtime.LookupNode(tool) // checked at load time
	scratch, err := toolProgram(c.Run.Program)
	if err != nil {
		return nil, c.Errorf(runtime.ClassConfig, "tool %s: %v", tool, err)
	}
	h, err := kind.Prepare(&syn, scratch)
	if err != nil {
		obs["error"] = "invalid tool call: " + err.Error()
		return obs, nil
	}
	res, err := h(ctx, &runtime.Call{Node: &syn, Run: c.Run, Attempt: 1, Scope: map[string]any{"args": args}})
	if err != nil {
		if denial := asDenial(err); denial != nil {
			c.Run.RecordDenial(c.Node.ID, tool, denial)
			obs["denied"] = denial.Msg
			return obs, nil
		}
		if ctx.Err() != nil {
			return nil, &runtime.Error{Class: runtime.ClassTimeout, Node: c.Node.ID, Kind: c.Node.Type,
				Msg: fmt.Sprintf("tool %s: run deadline reached", tool), Err: err}
		}
		switch runtime.ClassOf(err) {
		case runtime.ClassTimeout, runtime.ClassBudget:
			return nil, onNode(c, err)
		}
		obs["error"] = err.Error()
		c.Run.Audit().Info("agent_loop.tool", "node", c.Node.ID, "tool", tool, "ok", false)
		return obs, nil
	}
	c.Run.Audit().Info("agent_loop.tool", "node", c.Node.ID, "tool", tool, "ok", true)
	obs["ok"] = true
	obs["output"] = runtime.Normalize(res.Value)
	if res.Branch != "" {
		obs["branch"] = res.Branch
	}
	return obs, nil
}

// toolProgram is a node-less copy of the running program to prepare a
// synthetic tool node against: it keeps the workflow's declarations
// (secrets, MCP servers, budget, policy) but gives the preparation its own
// state, so concurrent runs never write to the shared program.
func toolProgram(p *runtime.Program) (*runtime.Program, error) {
	wf := *p.Workflow
	wf.Nodes, wf.Edges, wf.StartNodes, wf.Triggers, wf.HTTPRoutes, wf.Children = nil, nil, nil, nil, nil, nil
	return runtime.Compile(&wf, runtime.CompileOptions{})
}

// asDenial returns err as a policy error when it is one.
func asDenial(err error) *runtime.Error {
	var d *policy.Denial
	if errors.As(err, &d) {
		return &runtime.Error{Class: runtime.ClassPolicy, Target: d.Target, Msg: d.Error(), Err: err}
	}
	if e := runtime.AsError(err); e.Class == runtime.ClassPolicy {
		return e
	}
	return nil
}

// parseReply reads one model reply: a tool call (tool != "") or a final
// answer.
func parseReply(content string) (tool string, args map[string]any, final any, err error) {
	v, derr := runtime.DecodeJSON([]byte(trimFence(content)))
	if derr != nil {
		return "", nil, nil, fmt.Errorf(`reply is not JSON (%v); answer with {"tool": ..., "args": {...}} or {"final": ...}`, derr)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", nil, nil, fmt.Errorf(`reply is not a JSON object; answer with {"tool": ..., "args": {...}} or {"final": ...}`)
	}
	f, hasFinal := obj["final"]
	t, hasTool := obj["tool"]
	switch {
	case hasFinal && hasTool:
		return "", nil, nil, fmt.Errorf(`reply has both "tool" and "final"; send one`)
	case hasFinal:
		return "", nil, f, nil
	case !hasTool:
		return "", nil, nil, fmt.Errorf(`reply has neither "tool" nor "final"`)
	}
	name, ok := t.(string)
	if !ok || name == "" {
		return "", nil, nil, fmt.Errorf(`"tool" must be a tool name`)
	}
	args = map[string]any{}
	if raw, ok := obj["args"]; ok && raw != nil {
		if args, ok = raw.(map[string]any); !ok {
			return "", nil, nil, fmt.Errorf(`"args" must be a JSON object`)
		}
	}
	return name, args, nil, nil
}

// trimFence strips one surrounding Markdown code fence, which models often
// add around JSON.
func trimFence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "```"), "```")
	if i := strings.IndexByte(s, '\n'); i >= 0 && !strings.ContainsAny(s[:i], "{[\"") {
		s = s[i+1:] // drop the info string ("json")
	}
	return strings.TrimSpace(s)
}

// observationText renders an observation for the model, bounded in size.
func observationText(obs map[string]any) string {
	s := runtime.AsString(obs)
	if len(s) > maxObservation {
		cut := maxObservation
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("...[observation truncated: %d bytes in all]", len(s))
	}
	return s
}
