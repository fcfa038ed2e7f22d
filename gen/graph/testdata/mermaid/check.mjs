// Parses Mermaid documents with Mermaid's own parser, for gen/graph's
// TestMermaidParses. Usage: node check.mjs NODE_MODULES_DIR < docs.json,
// where docs.json is a JSON array of documents. Prints a JSON array with,
// for each document, the parse error or the vertex, edge and subgraph
// counts of the parsed flowchart.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(join(process.argv[2], 'resolve.js'));
const { JSDOM } = require('jsdom');
const dom = new JSDOM('<!DOCTYPE html><body></body>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.DOMParser = dom.window.DOMParser;
const { default: mermaid } = await import(pathToFileURL(require.resolve('mermaid')).href);
mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });

let input = '';
for await (const chunk of process.stdin) input += chunk;
const out = [];
for (const text of JSON.parse(input)) {
  try {
    const d = await mermaid.mermaidAPI.getDiagramFromText(text);
    const v = d.db.getVertices();
    out.push({
      type: d.type,
      vertices: v instanceof Map ? v.size : Object.keys(v).length,
      edges: d.db.getEdges().length,
      subgraphs: d.db.getSubGraphs().length,
    });
  } catch (e) {
    out.push({ error: String((e && e.message) || e) });
  }
}
process.stdout.write(JSON.stringify(out));
