package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnworks/kiln/capabilities/mcp/mcpclient"
	mcpspec "github.com/kilnworks/kiln/capabilities/mcp/spec"
	"github.com/kilnworks/kiln/capabilities/spec"
	"github.com/kilnworks/kiln/runtime"
	"github.com/kilnworks/kiln/runtime/policy"
	"github.com/kilnworks/kiln/runtime/workflow"
)

// The node kinds of this family. No build registers them from init: a
// generated program registers those its workflow uses, so the others' code
// is left out; RegisterKinds registers them all.
var (
	KindCallMCPTool     = runtime.NodeKind{Kind: "call_mcp_tool", Family: "mcp", Prepare: prepareTool, SideEffect: true}
	KindReadMCPResource = runtime.NodeKind{Kind: "read_mcp_resource", Family: "mcp", Prepare: prepareResource, SideEffect: true}
)

// RegisterKinds registers every node kind of this family (capabilities/all
// calls it; a generated program registers only the kinds it uses).
func RegisterKinds() {
	runtime.RegisterKinds(KindCallMCPTool, KindReadMCPResource)
}

// prepareServer resolves the server the node talks to and validates the
// workflow's MCP configuration, so a bad one never starts.
func prepareServer(n *workflow.Node, p *runtime.Program) (Server, error) {
	name, err := SelectServer(p.Workflow, n.Server)
	if err != nil {
		return Server{}, err
	}
	if err := validateConfig(p.Workflow); err != nil {
		return Server{}, err
	}
	return lookupServer(p.Workflow, name), nil
}

func prepareTool(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(mcpspec.CheckCallTool(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	if strings.TrimSpace(n.Tool) == "" {
		return nil, errors.New("tool is required")
	}
	srv, err := prepareServer(n, p)
	if err != nil {
		return nil, err
	}
	tool := n.Tool
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		args, err := toolArgs(c)
		if err != nil {
			return runtime.Result{}, err
		}
		// Both allowlists, before anything is dialled (or dry-run answers).
		if err := srv.ToolAllowed(tool); err != nil {
			return runtime.Result{}, err
		}
		if err := c.Run.Policy().MCPTool(srv.policyServer(), tool); err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"tool": tool, "server": srv.Name, "args": args, "dry_run": true}), nil
		}
		req := map[string]any{"server": srv.Name, "tool": tool, "args": args}
		res, err := runtime.Interact(ctx, c, "mcp.call_tool", req, func() (map[string]any, error) {
			client, err := mcpClient(c)
			if err != nil {
				return nil, err
			}
			c.AuditEffect("mcp.call_tool", srv.Name+"/"+tool)
			return client.CallTool(ctx, srv.Name, tool, args)
		})
		if err != nil && runtime.ClassOf(err) == runtime.ClassConfig { // no client; a replay without an answer
			return runtime.Result{}, err
		}
		if err != nil {
			return runtime.Result{}, callError(c, err, "server %s: tools/call %s", srv.Name, tool)
		}
		isError := res["isError"] == true
		out := map[string]any{
			"tool":       tool,
			"server":     srv.Name,
			"content":    orEmptyList(res["content"]),
			"is_error":   isError,
			"structured": res["structuredContent"],
		}
		if isError {
			return runtime.NextBranch(out, "error"), nil
		}
		return runtime.Next(out), nil
	}, nil
}

func prepareResource(n *workflow.Node, p *runtime.Program) (runtime.NodeFunc, error) {
	if err := spec.Err(mcpspec.CheckReadResource(n, spec.ForWorkflow(p.Workflow))); err != nil {
		return nil, err
	}
	if strings.TrimSpace(n.ResourceFrom) == "" {
		return nil, errors.New("resource_from is required")
	}
	srv, err := prepareServer(n, p)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, c *runtime.Call) (runtime.Result, error) {
		uri, err := c.FromString("resource_from", c.Node.ResourceFrom)
		if err != nil {
			return runtime.Result{}, err
		}
		if uri == "" {
			return runtime.Result{}, c.Errorf(runtime.ClassTool, "resource_from %q resolved to an empty URI", c.Node.ResourceFrom)
		}
		if err := srv.ResourceAllowed(uri); err != nil {
			return runtime.Result{}, err
		}
		if err := c.Run.Policy().MCPResource(srv.policyServer(), uri); err != nil {
			return runtime.Result{}, err
		}
		if c.DryRun() {
			return runtime.Next(map[string]any{"uri": uri, "server": srv.Name, "dry_run": true}), nil
		}
		req := map[string]any{"server": srv.Name, "uri": uri}
		res, err := runtime.Interact(ctx, c, "mcp.read_resource", req, func() (map[string]any, error) {
			client, err := mcpClient(c)
			if err != nil {
				return nil, err
			}
			c.AuditEffect("mcp.read_resource", srv.Name+" "+uri)
			return client.ReadResource(ctx, srv.Name, uri)
		})
		if err != nil && runtime.ClassOf(err) == runtime.ClassConfig { // no client; a replay without an answer
			return runtime.Result{}, err
		}
		if err != nil {
			return runtime.Result{}, callError(c, err, "server %s: resources/read %s", srv.Name, uri)
		}
		return runtime.Next(map[string]any{
			"uri":      uri,
			"server":   srv.Name,
			"contents": orEmptyList(res["contents"]),
		}), nil
	}, nil
}

// toolArgs resolves args_from: always an object. Absent (or null) is {},
// never null; anything else is an error naming the node.
func toolArgs(c *runtime.Call) (map[string]any, error) {
	if c.Node.ArgsFrom == "" {
		return map[string]any{}, nil
	}
	v, found := c.Lookup(c.Node.ArgsFrom)
	if !found || v == nil {
		return map[string]any{}, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, c.Errorf(runtime.ClassTool, "args_from %q resolved to %s, want an object (tool arguments)", c.Node.ArgsFrom, runtime.TypeName(v))
	}
	return obj, nil
}

func mcpClient(c *runtime.Call) (mcpclient.Client, error) {
	client := mcpclient.ClientFrom(c.Run.Services())
	if client == nil {
		return nil, c.Errorf(runtime.ClassConfig, "no MCP server is configured: declare [[mcp_servers]] or pass --mcp-stdio \"CMD ARGS\"")
	}
	return client, nil
}

// callError classifies a client failure: denials stay policy errors,
// everything else (JSON-RPC errors, lost servers) is an MCP error, which
// `retry` may retry. The run deadline keeps its cause so the engine
// reports a timeout.
func callError(c *runtime.Call, err error, format string, args ...any) error {
	if policy.IsDenial(err) {
		return err
	}
	if runtime.ClassOf(err) == runtime.ClassPolicy {
		return err
	}
	e := c.Errorf(runtime.ClassMCP, "%s: %s", fmt.Sprintf(format, args...), errText(err))
	e.Err = err
	return e
}

func orEmptyList(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}
