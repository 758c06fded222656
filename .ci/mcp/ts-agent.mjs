// An MCP client on the official TypeScript SDK for the gateway's tests,
// driven by one JSON argument:
//   {"http": URL, "key": KEY}                      streamable HTTP, or
//   {"stdio": COMMAND, "args": [...], "env": {...}} a process over stdio;
//   "list": true        list the tools (as the server lists them),
//   "call": {"name", "arguments"}   make one call,
//   "progress": true    ask for progress (the SDK sends a numeric token),
//   "retryFor": MS      on an error, connect again and call again until MS
//                       have passed (a client that survives a restart),
//   "timeout": MS       the request timeout (default the SDK's 60 s).
// Prints {"tools", "result", "progress": [...], "attempts", "error"} as JSON.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const out = { progress: [], attempts: 0 };

function transport() {
  if (spec.http) {
    return new StreamableHTTPClientTransport(new URL(spec.http), {
      requestInit: { headers: { Authorization: `Bearer ${spec.key}` } },
    });
  }
  return new StdioClientTransport({
    command: spec.stdio,
    args: spec.args || [],
    env: { ...process.env, ...(spec.env || {}) },
    stderr: "ignore",
  });
}

async function once() {
  const client = new Client({ name: "ts-agent", version: "1.0.0" });
  await client.connect(transport());
  try {
    if (spec.list) out.tools = (await client.listTools()).tools;
    if (spec.call) {
      const options = {};
      if (spec.timeout) options.timeout = spec.timeout;
      if (spec.progress) {
        options.onprogress = (p) => out.progress.push(p);
        options.resetTimeoutOnProgress = true;
      }
      out.result = await client.callTool({ name: spec.call.name, arguments: spec.call.arguments || {}, ...(spec.call._meta ? { _meta: spec.call._meta } : {}) }, undefined, options);
    }
  } finally {
    await client.close().catch(() => {});
  }
}

const until = Date.now() + (spec.retryFor || 0);
for (;;) {
  out.attempts++;
  try {
    await once();
    delete out.error;
    break;
  } catch (err) {
    out.error = String(err && err.message ? err.message : err);
    if (Date.now() >= until) {
      process.exitCode = 1;
      break;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}
console.log(JSON.stringify(out));
