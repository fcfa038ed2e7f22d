// Package spec declares the llm family: the llm_infer and agent_loop node
// kinds, the tools an agent loop may use, and the [[intelligence.backends]]
// providers (see docs/reference.md). It holds data and checks only, so the
// generator links it without the family.
package spec

import (
	"slices"
	"strings"

	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/capabilities/spec/rules"
	"github.com/kilnworks/kiln/runtime/workflow"
)

const (
	// MaxAgentSteps bounds an agent loop's max_steps.
	MaxAgentSteps = 64
	// MaxOutputRepairs bounds llm_infer's output_repairs.
	MaxOutputRepairs = 10
	// BranchExhausted is the branch an agent loop takes when it runs out
	// of steps or tokens.
	BranchExhausted = "exhausted"
	// InlineSchema as output_schema means "the answer must be JSON", no file.
	InlineSchema = "inline"
)

// agentTools lists the node kinds an agent_loop may be given as tools,
// sorted; a constant, so the declaration below stays static data that a
// sealed binary does not link.
const agentTools = "call_mcp_tool, http_request, read_env, read_file, shell_run, write_file"

// AgentTools are the node kinds an agent_loop may be given as tools.
var AgentTools = strings.Split(agentTools, ", ")

// Providers are the intelligence providers a backend may name.
var Providers = []string{"anthropic", "openai", "gemini", "openai-compatible"}

// Family is the llm family's declaration.
var Family = spec.Family{
	ID: "llm",
	Kinds: []spec.Kind{
		{
			Name: "llm_infer",
			Doc: "One completion from an intelligence backend. The prompt is a {{marker}} template rendered against input_from. With output_schema the answer must be JSON " +
				"that validates (\"inline\": any JSON); a failing answer is sent back with the errors up to output_repairs times.",
			Keys: []spec.Key{
				backend,
				{Name: "prompt", Type: spec.String, Doc: "the prompt template (this or prompt_file)"},
				{Name: "prompt_file", Type: spec.String, Doc: "a UTF-8 file holding the prompt template, read at load time"},
				{Name: "input_from", Type: spec.Path, Doc: "the value prompt markers resolve against"},
				{Name: "output_schema", Type: spec.String, Doc: "a JSON Schema file the answer must satisfy, or \"inline\""},
				{Name: "output_repairs", Type: spec.Int, Default: "0", Doc: "repair requests after an answer fails the schema"},
				maxTokens,
			},
			Limits: []string{"output_repairs 0..10", "max_tokens >= 1", "every call counts against [budget] max_llm_tokens"},
			Check:  CheckInfer,
			Output: "{content, parsed, usage}; dry-run: {content, dry_run: true}",
			Files:  inferFiles,
		},
		{
			Name: "agent_loop",
			Doc: "A bounded tool-using loop inside one node: each model reply calls one declared tool or gives the final answer. Tools run through their node kinds' handlers, " +
				"so the policy, dry-run, deadline and budgets are those of a declared node; a policy denial is fed back to the model, not overridden. See docs/agent_loop.md.",
			Keys: []spec.Key{
				backend,
				{Name: "max_steps", Type: spec.Int, Required: true, Doc: "the most model replies"},
				{Name: "tools", Type: spec.Strings, Required: true, Doc: "node kinds the model may call: " + agentTools},
				{Name: "instructions", Type: spec.String, Doc: "the task, a {{marker}} template (this or instructions_from)"},
				{Name: "instructions_from", Type: spec.Path, Doc: "the task, from the run context"},
				{Name: "max_tokens", Type: spec.Int, Doc: "the most tokens the whole loop may spend"},
			},
			Limits:   []string{"max_steps 1..64", "max_tokens >= 1 (the loop's total)", "one observation sent to the model at most 16 KiB"},
			Check:    CheckAgentLoop,
			Output:   "{result, steps, tokens, transcript}",
			Branches: []string{BranchExhausted},
		},
	},
	Check:         CheckBackends,
	Needs:         needs,
	NeedsIfLinked: true,
	NeedsDoc:      "the API key variable and base_url host of each openai-compatible backend (the other providers' come from the built-in needs catalog)",
}

var (
	backend   = spec.Key{Name: "backend", Type: spec.String, Required: true, Doc: "a [[intelligence.backends]] name, or \"default\" (the process's --intel-* backend)"}
	maxTokens = spec.Key{Name: "max_tokens", Type: spec.Int, Doc: "the completion token cap of each call"}
)

func inferFiles(n *workflow.Node) []string {
	var out []string
	if n.OutputSchema != "" && n.OutputSchema != InlineSchema {
		out = append(out, n.OutputSchema)
	}
	if n.PromptFile != "" {
		out = append(out, n.PromptFile)
	}
	return out
}

func checkBackend(is *spec.Issues, name string, ctx spec.Context) {
	is.Require("backend", name != "")
	if name != "" && !spec.Backend(ctx.Workflow(), name) {
		is.Add("unknown_backend", "backend %q is not declared in [[intelligence.backends]] (nor the built-in %q)", name, spec.DefaultBackend)
	}
}

// CheckInfer checks an llm_infer node.
func CheckInfer(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	checkBackend(&is, n.Backend, ctx)
	switch {
	case n.Prompt == "" && n.PromptFile == "":
		is.Add("missing_field", "prompt (or prompt_file) is required")
	case n.Prompt != "" && n.PromptFile != "":
		is.Add("field_conflict", "set prompt or prompt_file, not both")
	case n.PromptFile != "":
		_, file := ctx.File("prompt_file", n.PromptFile)
		is = append(is, file...)
	}
	if n.OutputRepairs != nil && (*n.OutputRepairs < 0 || *n.OutputRepairs > MaxOutputRepairs) {
		is.Add("out_of_range", "output_repairs must be within 0..%d, got %d", MaxOutputRepairs, *n.OutputRepairs)
	}
	if n.MaxTokens != nil && *n.MaxTokens < 1 {
		is.Add("out_of_range", "max_tokens must be at least 1, got %d", *n.MaxTokens)
	}
	if n.OutputSchema != "" && n.OutputSchema != InlineSchema {
		is = append(is, ctx.Schema("output_schema", n.OutputSchema)...)
	}
	return is
}

// CheckAgentLoop checks an agent_loop node.
func CheckAgentLoop(n *workflow.Node, ctx spec.Context) []spec.Issue {
	var is spec.Issues
	checkBackend(&is, n.Backend, ctx)
	is.Require("max_steps", n.MaxSteps != nil)
	is.Require("tools", n.Tools != nil)
	if n.MaxSteps != nil && (*n.MaxSteps < 1 || *n.MaxSteps > MaxAgentSteps) {
		is.Add("agent_loop_bounds", "max_steps must be within 1..%d, got %d", MaxAgentSteps, *n.MaxSteps)
	}
	if n.MaxTokens != nil && *n.MaxTokens < 1 {
		is.Add("agent_loop_bounds", "max_tokens must be at least 1, got %d", *n.MaxTokens)
	}
	if n.Tools != nil && len(n.Tools) == 0 {
		is.Add("agent_loop_tools", "tools must list at least one tool")
	}
	seen := map[string]bool{}
	for _, t := range n.Tools {
		switch {
		case !slices.Contains(AgentTools, t):
			is.Add("agent_loop_tools", "tool %q is not available to agent_loop (allowed: %s)", t, agentTools)
		case seen[t]:
			is.Add("agent_loop_tools", "tool %q is listed twice", t)
		}
		seen[t] = true
	}
	switch {
	case n.Instructions == "" && n.InstructionsFrom == "":
		is.Add("missing_field", "instructions (or instructions_from) is required")
	case n.Instructions != "" && n.InstructionsFrom != "":
		is.Add("field_conflict", "set instructions or instructions_from, not both")
	}
	return is
}

// CheckBackends checks [[intelligence.backends]].
func CheckBackends(wf *workflow.Workflow, _ spec.Context) []spec.Issue {
	if wf.Intelligence == nil {
		return nil
	}
	var is spec.Issues
	seen := map[string]bool{}
	for i, b := range wf.Intelligence.Backends {
		where := is.Entry("intelligence.backends", "backend", i, b.Name, seen, "duplicate_backend")
		for _, e := range CheckBackend(b) {
			is.Add(e.Code, "%s: %s", where, e.Message)
		}
	}
	return is
}

// CheckBackend checks one backend's provider, model, base_url, key
// variable and token cap; messages are relative to it.
func CheckBackend(b workflow.Backend) []spec.Issue {
	var is spec.Issues
	switch {
	case b.Provider == "":
		is.Add("missing_field", "provider is required")
	case !slices.Contains(Providers, b.Provider):
		is.Add("invalid_backend_provider", "provider %q must be anthropic, openai, gemini or openai-compatible", b.Provider)
	}
	is.Require("model", b.Model != "")
	if b.Provider == "openai-compatible" && b.BaseURL == "" {
		is.Add("missing_field", "base_url is required for provider openai-compatible")
	}
	if b.BaseURL != "" && !rules.HTTPURL(b.BaseURL) {
		is.Add("invalid_url", "base_url %q must be an http(s) URL", b.BaseURL)
	}
	if b.APIKeyEnv != "" && !spec.EnvName(b.APIKeyEnv) {
		is.Add("invalid_env_key", "api_key_env %q is not an environment variable name", b.APIKeyEnv)
	}
	if b.MaxTokens < 0 {
		is.Add("out_of_range", "max_tokens must not be negative, got %d", b.MaxTokens)
	}
	return is
}

// needs: an openai-compatible server has no conventional key variable or
// host, so its backend states them.
func needs(wf *workflow.Workflow) []spec.Need {
	if wf.Intelligence == nil {
		return nil
	}
	const class = "intelligence:openai-compatible"
	var out []spec.Need
	for _, b := range wf.Intelligence.Backends {
		if b.Provider != "openai-compatible" {
			continue
		}
		if b.APIKeyEnv != "" {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedSecret, Key: b.APIKeyEnv, Label: "API key of intelligence backend " + b.Name, Ungoverned: true})
		}
		if h := rules.Hostname(b.BaseURL); h != "" {
			out = append(out, spec.Need{Class: class, Kind: spec.NeedNetwork, Host: h, Ungoverned: true})
		}
	}
	return out
}
