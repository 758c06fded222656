// An MCP client on the official TypeScript SDK that signs in with OAuth,
// for the gateway's tests: node oauth-client.mjs URL TOOL ARGS_JSON
// It is given only the URL. It prints "AUTHORIZE <url>" on a line of its
// own when a person must consent, takes the code at its own loopback
// redirect, then prints {"tools": [names], "result": CallToolResult}.
import http from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, tool, args] = process.argv.slice(2);

// The loopback redirect, on a port of the system's choosing.
let deliverCode;
const code = new Promise((resolve) => (deliverCode = resolve));
const callback = http.createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  res.end(u.searchParams.get("code") ? "signed in; you may close this tab" : "no code");
  if (u.searchParams.get("code")) deliverCode(u.searchParams.get("code"));
});
await new Promise((resolve) => callback.listen(0, "127.0.0.1", resolve));
const redirect = `http://127.0.0.1:${callback.address().port}/callback`;

const store = {};
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return { client_name: "TS SDK OAuth test client", redirect_uris: [redirect], grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  },
  clientInformation() { return store.client; },
  saveClientInformation(info) { store.client = info; },
  tokens() { return store.tokens; },
  saveTokens(tokens) { store.tokens = tokens; },
  redirectToAuthorization(authorizationUrl) { console.log(`AUTHORIZE ${authorizationUrl.toString()}`); },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
};

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "ts-sdk-oauth-test-client", version: "1.0.0" });
  try {
    await client.connect(transport);
    return client;
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    await transport.finishAuth(await code);
    const again = new Client({ name: "ts-sdk-oauth-test-client", version: "1.0.0" });
    await again.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
    return again;
  }
}

try {
  const client = await connect();
  const { tools } = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
  console.log(JSON.stringify({ tools: tools.map((t) => t.name), result }));
  await client.close();
} catch (err) {
  console.log(JSON.stringify({ error: String(err && err.message ? err.message : err) }));
  process.exitCode = 1;
} finally {
  callback.close();
}
