// A stand-in for tickets-mcp: one queue resource and the apply tool, over
// MCP's stdio transport (newline-delimited JSON-RPC).
const readline = require("readline");
const rl = readline.createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
rl.on("line", (line) => {
  let m;
  try { m = JSON.parse(line); } catch { return; }
  if (m.id === undefined) return; // notifications
  switch (m.method) {
    case "initialize":
      return send({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: m.params.protocolVersion,
        capabilities: { resources: {}, tools: {} }, serverInfo: { name: "tickets", version: "1.0.0" } } });
    case "resources/read":
      return send({ jsonrpc: "2.0", id: m.id, result: { contents: [{ uri: m.params.uri, mimeType: "application/json",
        text: JSON.stringify({ owner: "ops", size: 3 }) }] } });
    case "tools/call":
      return send({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text", text: "applied " + JSON.stringify(m.params.arguments).length + " bytes" }] } });
    case "tools/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "apply_queue_changes", inputSchema: { type: "object" } }] } });
    case "resources/list":
      return send({ jsonrpc: "2.0", id: m.id, result: { resources: [] } });
    case "ping":
      return send({ jsonrpc: "2.0", id: m.id, result: {} });
  }
  send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
});
