package gen

import (
	"fmt"
	"mime"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// kindSpec lists the TOML keys a node kind requires and accepts
// (WORKFLOW-FORMAT §2). id, type and retry apply to every kind.
type kindSpec struct {
	required []string
	optional []string
}

var nodeKinds = map[string]kindSpec{
	"read_file":         {required: []string{"path_from"}},
	"read_env":          {required: []string{"key"}},
	"read_mcp_resource": {required: []string{"resource_from"}, optional: []string{"server"}},
	"parse_json":        {required: []string{"input_from"}},
	"template_render":   {required: []string{"template"}, optional: []string{"input_from"}},
	"json_select":       {required: []string{"input_from", "path"}},
	"diff_compute":      {required: []string{"left_from", "right_from"}},
	// prompt or prompt_file: checked in checkLLM.
	"llm_infer": {required: []string{"backend"},
		optional: []string{"prompt", "prompt_file", "input_from", "output_schema", "output_repairs", "max_tokens"}},
	// instructions or instructions_from: checked in checkAgentLoop.
	"agent_loop": {required: []string{"backend", "max_steps", "tools"},
		optional: []string{"instructions", "instructions_from", "max_tokens"}},
	"write_file":         {required: []string{"path_from", "content_from"}},
	"create_dir":         {required: []string{"path_from"}},
	"http_request":       {required: []string{"method", "url_from"}, optional: []string{"body_from", "headers"}},
	"call_mcp_tool":      {required: []string{"tool"}, optional: []string{"args_from", "server"}},
	"shell_run":          {required: []string{"command"}, optional: []string{"args_from", "timeout_secs"}},
	"call":               {required: []string{"workflow"}, optional: []string{"input_from", "start"}},
	"parallel":           {required: []string{"branches"}},
	"map":                {required: []string{"items_from", "workflow", "max_items"}, optional: []string{"max_concurrent", "start"}},
	"condition":          {required: []string{"expr"}},
	"switch":             {required: []string{"expr"}},
	"merge":              {},
	"fail":               {optional: []string{"reason"}},
	"pause_for_approval": {optional: []string{"reason"}},
	"respond":            {required: []string{"body_template"}, optional: []string{"status", "content_type", "input_from"}},
	"terminate":          {},
	// Extension: fires an internal.event trigger.
	"emit_event": {required: []string{"event"}, optional: []string{"payload_from"}},
}

// NodeKinds lists every node kind the validator accepts, sorted.
func NodeKinds() []string {
	out := make([]string, 0, len(nodeKinds))
	for k := range nodeKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var commonNodeKeys = []string{"id", "type", "retry"}

// agentTools are the tools an agent_loop may be given.
var agentTools = map[string]bool{
	"read_file": true, "write_file": true, "read_env": true,
	"http_request": true, "shell_run": true, "call_mcp_tool": true,
}

const (
	maxAgentSteps    = 64
	maxOutputRepairs = 10
)

var (
	envKeyRe     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	httpMethodRe = regexp.MustCompile(`^[A-Z]+$`)
	// headerNameRe is an RFC 9110 token.
	headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	// secretRefRe is the only placeholder a header value may hold.
	secretRefRe  = regexp.MustCompile(`^secret:([A-Za-z_][A-Za-z0-9_.-]*)$`)
	secretNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

func (c *checker) checkNodes() {
	if len(c.wf.Nodes) == 0 {
		c.add("no_nodes", "workflow: at least one [[nodes]] entry is required")
	}
	seen := map[string]bool{}
	for i := range c.wf.Nodes {
		n := &c.wf.Nodes[i]
		if n.ID == "" {
			c.add("missing_field", "nodes[%d]: id is required", i)
		} else if seen[n.ID] {
			c.add("duplicate_node_id", "%s: id %q is declared more than once", nodeLabel(n), n.ID)
		}
		seen[n.ID] = true
		c.checkNode(n, i)
	}
}

func (c *checker) checkNode(n *workflow.Node, i int) {
	where := nodeLabel(n)
	if n.ID == "" {
		where = fmt.Sprintf("nodes[%d] (%s)", i, n.Type)
	}
	spec, ok := nodeKinds[n.Type]
	if !ok {
		if n.Type == "" {
			c.add("missing_field", "%s: type is required", where)
		} else {
			c.add("unknown_node_type", "%s: unknown node type %q (known: %s)", where, n.Type, strings.Join(NodeKinds(), ", "))
		}
		return
	}
	c.checkFields(where, n, spec.required, spec.optional, commonNodeKeys)
	c.checkRetry(where, n.Retry)
	c.checkContextPaths(where, n)

	switch n.Type {
	case "read_env":
		if n.Key != "" && !envKeyRe.MatchString(n.Key) {
			c.add("invalid_env_key", "%s: key %q is not an environment variable name", where, n.Key)
		}
	case "llm_infer":
		c.checkLLM(where, n)
	case "agent_loop":
		c.checkAgentLoop(where, n)
	case "http_request":
		if n.Method != "" && !httpMethodRe.MatchString(n.Method) {
			c.add("invalid_http_method", "%s: method %q must be an upper-case HTTP method such as GET or POST", where, n.Method)
		}
		c.checkHeaders(where, n.Headers)
	case "call_mcp_tool", "read_mcp_resource":
		if n.Server != "" && !c.servers[n.Server] {
			c.add("unknown_mcp_server", "%s: server %q is not declared in [[mcp_servers]]", where, n.Server)
		}
	case "shell_run":
		if n.Command != "" && (!filepath.IsAbs(n.Command) || filepath.Clean(n.Command) != n.Command) {
			c.add("invalid_shell_command", "%s: command %q must be a clean absolute path (no PATH lookup, no shell)", where, n.Command)
		}
		if n.TimeoutSecs != nil && *n.TimeoutSecs < 1 {
			c.add("out_of_range", "%s: timeout_secs must be at least 1, got %d", where, *n.TimeoutSecs)
		}
	case "call":
		c.checkChild(n, n.Workflow, n.Start)
	case "map":
		if n.MaxItems != nil && *n.MaxItems < 1 {
			c.add("map_bounds", "%s: max_items must be at least 1, got %d", where, *n.MaxItems)
		}
		if n.MaxConcurrent != nil && *n.MaxConcurrent < 1 {
			c.add("map_bounds", "%s: max_concurrent must be at least 1, got %d", where, *n.MaxConcurrent)
		}
		c.checkChild(n, n.Workflow, n.Start)
	case "parallel":
		for j, b := range n.Branches {
			if b.Workflow == "" {
				c.add("missing_field", "%s: branches[%d].workflow is required", where, j)
			}
			if b.InputFrom != "" && !validContextPath(b.InputFrom) {
				c.add("invalid_context_path", "%s: branches[%d].input_from %q is not a dotted path", where, j, b.InputFrom)
			}
			c.checkChild(n, b.Workflow, b.Start)
		}
	case "respond":
		if n.Status != nil && (*n.Status < 100 || *n.Status > 599) {
			c.add("respond_status", "%s: status %d is outside 100..599", where, *n.Status)
		}
		if n.ContentType != "" {
			if _, _, err := mime.ParseMediaType(n.ContentType); err != nil || strings.ContainsAny(n.ContentType, "\r\n") {
				c.add("respond_content_type", "%s: content_type %q is not a media type", where, n.ContentType)
			}
		}
	}
}

func (c *checker) checkLLM(where string, n *workflow.Node) {
	if n.Backend != "" && !c.backends[n.Backend] {
		c.add("unknown_backend", "%s: backend %q is not declared in [[intelligence.backends]] (nor the built-in \"default\")", where, n.Backend)
	}
	switch {
	case n.Prompt == "" && n.PromptFile == "":
		c.add("missing_field", "%s: prompt (or prompt_file) is required", where)
	case n.Prompt != "" && n.PromptFile != "":
		c.add("field_conflict", "%s: set prompt or prompt_file, not both", where)
	case n.PromptFile != "":
		c.asset(where, "prompt_file", "file", n.PromptFile)
	}
	if n.OutputRepairs != nil && (*n.OutputRepairs < 0 || *n.OutputRepairs > maxOutputRepairs) {
		c.add("out_of_range", "%s: output_repairs must be within 0..%d, got %d", where, maxOutputRepairs, *n.OutputRepairs)
	}
	if n.MaxTokens != nil && *n.MaxTokens < 1 {
		c.add("out_of_range", "%s: max_tokens must be at least 1, got %d", where, *n.MaxTokens)
	}
	if n.OutputSchema != "" && n.OutputSchema != inlineSchema {
		if data, ok := c.asset(where, "output_schema", "schema", n.OutputSchema); ok {
			c.checkSchema(where, "output_schema", n.OutputSchema, data)
		}
	}
}

func (c *checker) checkAgentLoop(where string, n *workflow.Node) {
	if n.Backend != "" && !c.backends[n.Backend] {
		c.add("unknown_backend", "%s: backend %q is not declared in [[intelligence.backends]] (nor the built-in \"default\")", where, n.Backend)
	}
	if n.MaxSteps != nil && (*n.MaxSteps < 1 || *n.MaxSteps > maxAgentSteps) {
		c.add("agent_loop_bounds", "%s: max_steps must be within 1..%d, got %d", where, maxAgentSteps, *n.MaxSteps)
	}
	if n.MaxTokens != nil && *n.MaxTokens < 1 {
		c.add("agent_loop_bounds", "%s: max_tokens must be at least 1, got %d", where, *n.MaxTokens)
	}
	if n.Tools != nil && len(n.Tools) == 0 {
		c.add("agent_loop_tools", "%s: tools must list at least one tool", where)
	}
	seen := map[string]bool{}
	for _, t := range n.Tools {
		switch {
		case !agentTools[t]:
			c.add("agent_loop_tools", "%s: tool %q is not available to agent_loop (allowed: call_mcp_tool, http_request, read_env, read_file, shell_run, write_file)", where, t)
		case seen[t]:
			c.add("agent_loop_tools", "%s: tool %q is listed twice", where, t)
		}
		seen[t] = true
	}
	switch {
	case n.Instructions == "" && n.InstructionsFrom == "":
		c.add("missing_field", "%s: instructions (or instructions_from) is required", where)
	case n.Instructions != "" && n.InstructionsFrom != "":
		c.add("field_conflict", "%s: set instructions or instructions_from, not both", where)
	}
}

// checkHeaders enforces the declared-header contract: RFC 9110 names,
// no CR/LF, and no placeholder other than {{secret:NAME}} of a declared
// secret (values are never context-interpolated).
func (c *checker) checkHeaders(where string, headers map[string]string) {
	for _, name := range runtime.SortedKeys(headers) {
		val := headers[name]
		if !headerNameRe.MatchString(name) {
			c.add("invalid_header", "%s: header name %q is not a valid HTTP field name", where, name)
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			c.add("invalid_header", "%s: header %s: value contains CR, LF or NUL", where, name)
		}
		rest := val
		for {
			open := strings.Index(rest, "{{")
			if open < 0 {
				if strings.Contains(rest, "}}") {
					c.add("invalid_header_placeholder", "%s: header %s: unmatched }}", where, name)
				}
				break
			}
			end := strings.Index(rest[open+2:], "}}")
			if end < 0 {
				c.add("invalid_header_placeholder", "%s: header %s: unclosed {{", where, name)
				break
			}
			inner := strings.TrimSpace(rest[open+2 : open+2+end])
			m := secretRefRe.FindStringSubmatch(inner)
			switch {
			case m == nil:
				c.add("invalid_header_placeholder", "%s: header %s: placeholder {{%s}} is not allowed; header values take literals and {{secret:NAME}} only", where, name, inner)
			case !c.secrets[m[1]]:
				c.add("unknown_secret", "%s: header %s: secret %q is not declared in [[secrets]]", where, name, m[1])
			}
			rest = rest[open+2+end+2:]
		}
	}
}

func (c *checker) checkRetry(where string, r *workflow.Retry) {
	if r == nil {
		return
	}
	if r.MaxAttempts < 1 {
		c.add("invalid_retry", "%s: retry.max_attempts must be at least 1, got %d", where, r.MaxAttempts)
	}
	if r.BackoffMS != nil && *r.BackoffMS < 0 {
		c.add("invalid_retry", "%s: retry.backoff_ms must not be negative, got %d", where, *r.BackoffMS)
	}
	if r.On != "" && r.On != "any" && r.On != "transient" {
		c.add("invalid_retry", "%s: retry.on must be \"any\" or \"transient\", got %q", where, r.On)
	}
	if r.Jitter < 0 || r.Jitter > 1 {
		c.add("invalid_retry", "%s: retry.jitter must be within 0.0..1.0, got %v", where, r.Jitter)
	}
}

// checkContextPaths checks the syntax of every dotted context path a node
// declares: non-empty segments.
func (c *checker) checkContextPaths(where string, n *workflow.Node) {
	paths := []struct{ key, val string }{
		{"input_from", n.InputFrom}, {"path_from", n.PathFrom}, {"content_from", n.ContentFrom},
		{"resource_from", n.ResourceFrom}, {"left_from", n.LeftFrom}, {"right_from", n.RightFrom},
		{"url_from", n.URLFrom}, {"body_from", n.BodyFrom}, {"args_from", n.ArgsFrom},
		{"items_from", n.ItemsFrom}, {"expr", n.Expr}, {"instructions_from", n.InstructionsFrom},
		{"payload_from", n.PayloadFrom},
	}
	if n.Type == "json_select" {
		paths = append(paths, struct{ key, val string }{"path", n.Path})
	}
	for _, p := range paths {
		if p.val != "" && !validContextPath(p.val) {
			c.add("invalid_context_path", "%s: %s %q is not a dotted path (empty segment or surrounding space)", where, p.key, p.val)
		}
	}
}

// validContextPath: dot-separated, no empty segment, no surrounding space.
func validContextPath(p string) bool {
	if strings.TrimSpace(p) != p {
		return false
	}
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return false
		}
	}
	return true
}
