// A TypeScript-SDK MCP client (the SDK the MCP Inspector and many hosts are built on),
// run by tests/test_mcp_ts.py against `memidex mcp`.
//
//   node client.mjs PYTHON ROOT < calls.json          # starts `memidex mcp` (stdio)
//   node client.mjs --http URL [TOKEN] < calls.json   # a running `mcp --transport http`
//
// calls.json: [{"tool": "...", "arguments": {...}}, ...]. Prints one JSON object:
// {"tools": [names], "calls": [{"tool", "isError", "text", "structured", "thrown"}]},
// where "thrown" is the message of an exception the SDK raised instead of giving the
// result (e.g. a result whose structured content breaks the tool's output schema).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const calls = JSON.parse(readFileSync(0, "utf-8"));
let transport;
if (args[0] === "--http") {
  const headers = args[2] ? { Authorization: `Bearer ${args[2]}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(args[1]), { requestInit: { headers } });
} else {
  const [python, root] = args;
  transport = new StdioClientTransport({
    command: python,
    args: ["-m", "memidex", "--root", root, "mcp"],
    cwd: root,
    stderr: "inherit",
  });
}
const client = new Client({ name: "memidex-ts-test", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools;
const out = { tools: tools.map((t) => t.name), calls: [] };
for (const call of calls) {
  const row = { tool: call.tool, isError: null, text: null, structured: null, thrown: null };
  try {
    const res = await client.callTool({ name: call.tool, arguments: call.arguments });
    row.isError = res.isError === true;
    row.text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text);
    row.structured = res.structuredContent ?? null;
  } catch (err) {
    row.thrown = String(err && err.message ? err.message : err);
  }
  out.calls.push(row);
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
