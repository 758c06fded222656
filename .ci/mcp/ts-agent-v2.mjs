// An MCP client on the TypeScript SDK v2 (@modelcontextprotocol/client,
// pinned), for the gateway's tests: node ts-agent-v2.mjs '{"http": URL,
// "key": KEY, "call": {"name", "arguments", "_meta"}, "timeout": MS}' (or
// "stdio": COMMAND, "args", "env" for a process over stdio) makes one call
// and prints {"result", "error"} as JSON; with "prompt": {"name",
// "arguments"}, "read": URI or "complete": {"ref", "argument"} instead of
// "call", it gets that prompt, reads that resource or asks for that
// completion; "negotiate": "auto" lets the client probe for 2026-07-28
// (server/discover) rather than initialize at 2025-11-25, its default;
// "answers": {"sampling": TEXT, "elicitation": CONTENT} declares those
// capabilities and answers what a server asks with them, and "asked" in
// the output lists what it was asked, in order.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const spec = JSON.parse(process.argv[2]);
const out = {};
const answers = spec.answers || {};
const capabilities = {};
if (answers.sampling !== undefined) capabilities.sampling = {};
if (answers.elicitation !== undefined) capabilities.elicitation = { form: {} };
const client = new Client({ name: "ts-agent-v2", version: "1.0.0" }, {
  capabilities, ...(spec.negotiate ? { versionNegotiation: { mode: spec.negotiate } } : {}) });
if (answers.sampling !== undefined) {
  client.setRequestHandler("sampling/createMessage", async (request) => {
    (out.asked ||= []).push({ method: "sampling/createMessage", params: request.params });
    return { model: "ts-agent-v2", role: "assistant", content: { type: "text", text: answers.sampling } };
  });
}
if (answers.elicitation !== undefined) {
  client.setRequestHandler("elicitation/create", async (request) => {
    (out.asked ||= []).push({ method: "elicitation/create", params: request.params });
    return { action: "accept", content: answers.elicitation };
  });
}
try {
  await client.connect(spec.http
    ? new StreamableHTTPClientTransport(new URL(spec.http), { requestInit: { headers: { Authorization: `Bearer ${spec.key}` } } })
    : new StdioClientTransport({ command: spec.stdio, args: spec.args || [], env: { ...process.env, ...(spec.env || {}) }, stderr: "ignore" }));
  const options = spec.timeout ? { timeout: spec.timeout } : undefined;
  if (spec.prompt) out.result = await client.getPrompt(spec.prompt, options);
  else if (spec.read) out.result = await client.readResource({ uri: spec.read }, options);
  else if (spec.complete) out.result = await client.complete(spec.complete, options);
  else out.result = await client.callTool({ name: spec.call.name, arguments: spec.call.arguments || {}, ...(spec.call._meta ? { _meta: spec.call._meta } : {}) }, options);
} catch (err) {
  out.error = String(err && err.message ? err.message : err);
  process.exitCode = 1;
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
