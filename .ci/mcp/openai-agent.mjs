// The OpenAI Agents JS SDK (@openai/agents, pinned) as a user runs it: an
// Agent whose tools come from Countersign's /mcp (its streamable HTTP MCP
// server class), driven by an OpenAI-compatible model at MODEL_URL (a
// scripted one in the tests): node openai-agent.mjs MCP_URL AGENT_KEY MODEL_URL [TIMEOUT_MS]
// prints {"final": the agent's last answer, "outputs": [tool outputs]}.
// TIMEOUT_MS is the MCP server class's request timeout (default 120000).
import { Agent, MCPServerStreamableHttp, OpenAIChatCompletionsModel, run, setTracingDisabled } from "@openai/agents";
import OpenAI from "openai";

const [mcpURL, key, modelURL, timeoutMS] = process.argv.slice(2);
setTracingDisabled(true);
const server = new MCPServerStreamableHttp({
  url: mcpURL,
  name: "countersign",
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
  timeout: Number(timeoutMS || 120000),
});
try {
  await server.connect();
  const model = new OpenAIChatCompletionsModel(new OpenAI({ apiKey: "scripted", baseURL: modelURL }), "scripted");
  const agent = new Agent({
    name: "billing",
    instructions: "Pay what you are asked to pay, with the pay tool.",
    mcpServers: [server],
    model,
  });
  const result = await run(agent, "Pay invoice 1.", { maxTurns: 20 });
  const outputs = result.newItems.filter((i) => i.type === "tool_call_output_item").map((i) => i.output);
  console.log(JSON.stringify({ final: result.finalOutput, outputs }));
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.stack ? err.stack : err) }));
  process.exitCode = 1;
} finally {
  await server.close().catch(() => {});
}
