// An MCP client built on the official TypeScript SDK's experimental tasks
// client, for the gateway's tests:
//   node tasks-client.mjs URL AGENT_KEY TOOL ARGS_JSON [cancel]
// prints one JSON line for what it learns when connected ({"connected":
// {"tasks": server's tasks capability, "taskSupport": the tool's}), then
// one per message of callToolStream (taskCreated, taskStatus, result,
// error); with "cancel", it cancels the task once created and prints
// {"cancelled": the task} too.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, tool, args, mode] = process.argv.slice(2);
const say = (v) => console.log(JSON.stringify(v));
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "ts-tasks-client", version: "1.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const listed = tools.find((t) => t.name === tool);
  say({ connected: { tasks: client.getServerCapabilities()?.tasks ?? null, taskSupport: listed?.execution?.taskSupport ?? null } });
  const stream = client.experimental.tasks.callToolStream(
    { name: tool, arguments: JSON.parse(args) }, undefined, { task: { ttl: 600000 }, timeout: 120000 });
  for await (const message of stream) {
    if (message.type === "error") {
      say({ type: "error", error: String(message.error?.message ?? message.error) });
      continue;
    }
    say(message);
    if (message.type === "taskCreated" && mode === "cancel") {
      say({ cancelled: await client.experimental.tasks.cancelTask(message.task.taskId) });
    }
  }
  await client.close();
} catch (err) {
  say({ type: "error", error: String(err && err.message ? err.message : err) });
  process.exitCode = 1;
}
