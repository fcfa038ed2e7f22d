// Package mcp is kiln's MCP family (build tag kiln_mcp): the
// call_mcp_tool and read_mcp_resource nodes, the [[mcp_servers]] client
// pool, and the live mcp.resource.updated / mcp.resource.created triggers.
//
// Authority is bounded twice, before anything is dialled: a declared
// server's own allow_tools / allow_resources, then the workflow's
// [policy.mcp]. An empty allowlist allows nothing (discovery is never
// authorization). The legacy --mcp-stdio server is named "default" and is
// bounded by [policy.mcp] alone, as in the reference runtime.
//
// Servers start on first use (or at serve start-up), are shared by every
// run, are restarted once when they die, and are shut down on Close. A
// stdio server's process sees only PATH and the env vars its declaration
// names (values resolved from secrets, never the operator's environment).
package mcp
