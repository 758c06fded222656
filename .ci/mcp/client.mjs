// An MCP client built on the official TypeScript SDK, for the gateway's
// tests: node client.mjs URL AGENT_KEY TOOL ARGS_JSON
// prints {"tools": [names], "result": CallToolResult} as JSON.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, tool, args] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "ts-sdk-test-client", version: "1.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), result }));
  await client.close();
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.message ? err.message : err) }));
  process.exitCode = 1;
}
