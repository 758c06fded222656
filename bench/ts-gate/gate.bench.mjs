// The seed article's gate, in memory, transcribed from TypeScript to plain
// JavaScript (types removed, logic unchanged), so its cost can be measured
// on the same machine as Countersign's gate. The article logs every call
// with console.log; logging is off by default, as Countersign's in-memory
// benchmark does no I/O either. ARTICLE_LOG=1 turns the article's log line
// back on (run it with stdout to /dev/null; results go to stderr).
import { z } from "zod";

const getOrderStatus = {
  name: "get_order_status",
  risk: "read",
  input: z.object({ orderId: z.string().min(1) }),
  run: async ({ orderId }) => ({ orderId, status: "shipped" }),
};
const issueRefund = {
  name: "issue_refund",
  risk: "high_write",
  input: z.object({ orderId: z.string().min(1), amount: z.number().positive().max(5000) }),
  run: async ({ orderId, amount }) => ({ orderId, refunded: amount }),
};
const tools = [getOrderStatus, issueRefund];

function policy(toolName, risk, args) {
  if (risk === "read" || risk === "low_write") return { kind: "allow" };
  if (toolName === "issue_refund") {
    if (args.amount <= 50) return { kind: "allow" };
    return { kind: "needs_approval", reason: `Refund of $${args.amount}` };
  }
  return { kind: "needs_approval", reason: `High-risk tool: ${toolName}` };
}

let approvalQueue = [];
const articleLog = process.env.ARTICLE_LOG === "1";
function log(entry) {
  if (articleLog) console.log(JSON.stringify({ at: new Date().toISOString(), ...entry }));
}

async function executeToolCall(toolName, rawArgs) {
  const tool = tools.find((t) => t.name === toolName);
  if (!tool) return { error: `Unknown tool: ${toolName}` };
  const parsed = tool.input.safeParse(rawArgs);
  if (!parsed.success) return { error: parsed.error.issues.map((i) => i.message).join("; ") };
  const decision = policy(tool.name, tool.risk, parsed.data);
  log({ toolName, args: parsed.data, decision });
  if (decision.kind === "deny") return { error: decision.reason };
  if (decision.kind === "needs_approval") {
    const action = { id: crypto.randomUUID(), toolName, args: parsed.data, reason: decision.reason, createdAt: new Date() };
    approvalQueue.push(action);
    return { status: "pending_approval", message: "A team member will review this request shortly.", actionId: action.id };
  }
  return tool.run(parsed.data);
}

// The model's arguments arrive as JSON text, as they do for Countersign.
async function bench(name, toolName, json, n) {
  for (let i = 0; i < 20000; i++) await executeToolCall(toolName, JSON.parse(json)); // warm up
  approvalQueue = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    await executeToolCall(toolName, JSON.parse(json));
    if (approvalQueue.length > 10000) approvalQueue = [];
  }
  const ns = Number(process.hrtime.bigint() - start) / n;
  console.error(`${name}${articleLog ? "+log" : ""}\t${ns.toFixed(0)} ns/op`);
}

await bench("ts-gate/read", "get_order_status", '{"orderId":"A1002"}', 300000);
await bench("ts-gate/refund900", "issue_refund", '{"orderId":"A1002","amount":900}', 300000);
