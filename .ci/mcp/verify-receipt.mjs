// Checks a Countersign receipt with npm's jose, an implementation nobody
// here wrote: reads {"receipt": JWS, "keys": JWK Set} on stdin and prints
// {"ok": true, "payload": ...} or {"ok": false, "error": "..."}.
import { compactVerify, createLocalJWKSet } from "jose";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const { receipt, keys } = JSON.parse(input);
try {
  const { payload, protectedHeader } = await compactVerify(receipt, createLocalJWKSet(keys), { algorithms: ["EdDSA", "Ed25519"] });
  console.log(JSON.stringify({ ok: true, kid: protectedHeader.kid, typ: protectedHeader.typ, payload: JSON.parse(new TextDecoder().decode(payload)) }));
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: String(e && e.code ? e.code + ": " + e.message : e) }));
}
