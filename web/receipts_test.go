package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web"
)

// joseVerify checks a receipt with npm's jose (.ci/mcp/verify-receipt.mjs),
// an implementation nobody here wrote.
func joseVerify(t *testing.T, receipt string, keys json.RawMessage) map[string]any {
	t.Helper()
	script, _ := filepath.Abs("../.ci/mcp/verify-receipt.mjs")
	_, nodeErr := exec.LookPath("node")
	_, joseErr := os.Stat(filepath.Join(filepath.Dir(script), "node_modules/jose"))
	if nodeErr != nil || joseErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node or .ci/mcp's jose is missing (%v, %v): .ci/run installs them", nodeErr, joseErr)
		}
		t.Skip("no node or no .ci/mcp/node_modules: run make test, which installs them")
	}
	in, _ := json.Marshal(map[string]any{"receipt": receipt, "keys": keys})
	cmd := exec.Command("node", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("verify-receipt.mjs: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("verify-receipt.mjs printed %q", out)
	}
	return got
}

// alter changes one part of a compact JWS: 0 the header, 1 the payload, 2
// the signature, each by edit (of the decoded JSON for 0 and 1).
func alter(jws string, part int, edit func(string) string) string {
	parts := strings.Split(jws, ".")
	if part == 2 {
		parts[2] = edit(parts[2])
		return strings.Join(parts, ".")
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[part])
	parts[part] = base64.RawURLEncoding.EncodeToString([]byte(edit(string(b))))
	return strings.Join(parts, ".")
}

// Every call that ends has a signed receipt an outsider checks with the
// public keys alone: npm's jose verifies it, and refuses it when any field
// of the payload, the signature or the kid is altered. It binds what ran
// to what was approved: the arguments' digest, who approved in which role,
// the policy version, the result's digest and the call's last audit event.
// The agent that made the call and staff may read it; another agent may not.
func TestReceiptsAreSignedAndCheckedByAnotherImplementation(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	other, _, _ := a.accounts.AddAgent(ctx, "other", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})

	read := a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A1"},"session":"s1","customer_id":"cus_1"}`)
	refund := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A2","amount":40},"session":"s1","customer_id":"cus_1"}`)
	if read.Status != 201 || refund.Status != 201 {
		t.Fatalf("calls: %s / %s", read.Raw, refund.Raw)
	}
	refundID := callOf(t, refund)["id"].(string)
	if r := a.do("GET", "/api/v1/calls/"+refundID+"/receipt", key, ""); r.Status != 409 {
		t.Fatalf("a receipt of a call still waiting: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/actions/"+refundID+"/approve", tok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	done := callOf(t, a.do("GET", "/api/v1/calls/"+refundID+"?wait=10s", key, ""))
	if done["status"] != "succeeded" || done["receipt"] != "/api/v1/calls/"+refundID+"/receipt" {
		t.Fatalf("the call once final: %v", done)
	}

	keysResp := a.do("GET", "/api/v1/receipts/keys", "", "")
	if keysResp.Status != 200 || !strings.Contains(keysResp.Header.Get("Content-Type"), "jwk-set+json") {
		t.Fatalf("keys: %d %s", keysResp.Status, keysResp.Raw)
	}
	keys := json.RawMessage(keysResp.Raw)

	for _, c := range []struct {
		id     string
		status string
	}{{callOf(t, read)["id"].(string), "succeeded"}, {refundID, "succeeded"}} {
		r := a.do("GET", "/api/v1/calls/"+c.id+"/receipt", key, "")
		if r.Status != 200 {
			t.Fatalf("receipt of %s: %d %s", c.id, r.Status, r.Raw)
		}
		jws := r.Body["receipt"].(string)
		got := joseVerify(t, jws, keys)
		p, _ := got["payload"].(map[string]any)
		if got["ok"] != true || p["call"] != c.id || p["status"] != c.status || got["typ"] != receipts.Type {
			t.Fatalf("jose on %s: %v", c.id, got)
		}
		// The same receipt every time it is asked for, by staff too.
		if again := a.do("GET", "/api/v1/calls/"+c.id+"/receipt", tok, ""); again.Status != 200 || again.Body["receipt"] != jws {
			t.Fatalf("staff's copy differs: %d %s", again.Status, again.Raw)
		}
		if r := a.do("GET", "/api/v1/calls/"+c.id+"/receipt", other, ""); r.Status != 404 {
			t.Fatalf("another agent read the receipt: %d %s", r.Status, r.Raw)
		}
		if r := a.do("GET", "/api/v1/calls/"+c.id+"/receipt", "", ""); r.Status != 401 {
			t.Fatalf("nobody read the receipt: %d %s", r.Status, r.Raw)
		}
		for name, forged := range map[string]string{
			"status": alter(jws, 1, func(s string) string { return strings.Replace(s, `"status":"succeeded"`, `"status":"rejected"`, 1) }),
			"args":   alter(jws, 1, func(s string) string { return strings.Replace(s, `"args_digest":"`, `"args_digest":"0`, 1) }),
			"signature": alter(jws, 2, func(s string) string {
				return strings.Map(func(r rune) rune { return map[bool]rune{true: 'B', false: 'A'}[r == 'A'] }, s[:4]) + s[4:]
			}),
			"kid": alter(jws, 0, func(s string) string { return strings.Replace(s, `"kid":"cs-`, `"kid":"cs-0`, 1) }),
		} {
			if got := joseVerify(t, forged, keys); got["ok"] != false {
				t.Errorf("jose accepted a receipt with its %s altered: %v", name, got)
			}
			var set jose.JSONWebKeySet
			_ = json.Unmarshal(keys, &set)
			if _, _, err := receipts.Verify(forged, set); err == nil {
				t.Errorf("receipts.Verify accepted a receipt with its %s altered", name)
			}
		}
	}

	// What the refund's receipt binds.
	r := a.do("GET", "/api/v1/calls/"+refundID+"/receipt", key, "")
	var p models.ReceiptPayload
	raw, _ := json.Marshal(r.Body["payload"])
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	call, _ := a.store.ToolCall(ctx, refundID)
	events, _ := a.store.AuditEventsFor(ctx, refundID)
	sum := sha256.Sum256([]byte(call.Result))
	env := p.Envelope
	if env.ArgsDigest != call.ArgsHash || env.Tool != "refund_order" || env.Decision != "needs_approval" || env.PolicyVersion != call.PolicyVersion ||
		env.Customer != "cus_1" || env.Session != "s1" || env.Agent == "" || !strings.HasPrefix(env.AskedBy, "agent:bot") ||
		len(env.Approvals) != 1 || env.Approvals[0].Name != "Ann" || env.Approvals[0].Role != models.Approver || env.Approvals[0].ArgsDigest != call.ArgsHash ||
		p.ResultDigest != hex.EncodeToString(sum[:]) || p.Audit.Seq != events[len(events)-1].Seq || p.Audit.Hash != events[len(events)-1].Hash ||
		p.Times.Started == nil || p.Times.Finished == nil || p.Times.Decided == nil {
		t.Fatalf("the refund's receipt: %+v", p)
	}
}

// A call that ended while nothing signed (the process killed between the
// outcome and its receipt) gets its receipt when the next process starts:
// every final call has exactly one.
func TestEveryFinalCallHasOneReceiptAfterARestart(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	// The running signer starts with a repair of its own; a first call
	// signed proves that repair is behind us (it ran before the queue
	// was read), so what follows is left to the restart's.
	first := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A9"},"session":"s1"}`))["id"].(string)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if have, _ := a.store.HaveReceipts(ctx, []string{first}); len(have) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running signer never signed the first call")
		}
	}
	// Calls recorded by a gate whose signer never heard of them (its
	// queue dropped).
	a.store.SetFinished(nil)
	var ids []string
	for i := 0; i < 5; i++ {
		r := a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A`+string(rune('0'+i))+`"},"session":"s1"}`)
		ids = append(ids, callOf(t, r)["id"].(string))
	}
	have, err := a.store.HaveReceipts(ctx, ids)
	if err != nil || len(have) != 0 {
		t.Fatalf("receipts before the restart: %v %v", have, err)
	}
	// What the next start runs first.
	signer, err := receipts.New(ctx, a.store, nil, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := signer.Repair(ctx); n != 5 {
		t.Fatalf("repair signed %d receipts, want 5", n)
	}
	if n := signer.Repair(ctx); n != 0 {
		t.Fatalf("a second repair signed %d more", n)
	}
	have, _ = a.store.HaveReceipts(ctx, ids)
	if len(have) != 5 {
		t.Fatalf("after the repair: %v", have)
	}
	// Signed again for a call that has one (the gateway's answer racing
	// the sweep or another instance), the new receipt is not kept: the
	// first kept is the receipt, and it is what the signer hands out.
	kept, err := a.store.Receipt(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	call, err := a.store.ToolCall(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	again, err := signer.Fresh(ctx, call)
	if err != nil || again.JWS != kept.JWS || again.KeyID != kept.KeyID {
		t.Fatalf("signed again, the receipt handed out is not the one kept: %v", err)
	}
	if now, _ := a.store.Receipt(ctx, ids[0]); now.JWS != kept.JWS {
		t.Fatal("signing again replaced the kept receipt")
	}
	// audit verify's check of the kept receipts: all verify and match
	// their records.
	if rep, err := receipts.VerifyStored(ctx, a.store); err != nil || rep.Receipts < 5 || rep.Missing != 0 || len(rep.Failures) != 0 {
		t.Fatalf("the kept receipts: %+v %v", rep, err)
	}
}

// A receipt kept for one call that is another's, or altered, is named by
// the check of the kept receipts (countersign audit verify).
func TestAlteredReceiptsAreNamed(t *testing.T) {
	dsn := storetest.DSN(t)
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := gateAPITools(t)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	a := startApp(t, appConfig{Store: store, Tools: reg, Policy: pol, Log: discardLog()}, false)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	one := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A1"},"session":"s1"}`))["id"].(string)
	two := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A2"},"session":"s1"}`))["id"].(string)
	for _, id := range []string{one, two} {
		if r := a.do("GET", "/api/v1/calls/"+id+"/receipt", key, ""); r.Status != 200 {
			t.Fatalf("receipt: %d %s", r.Status, r.Raw)
		}
	}
	storetest.Tamper(t, dsn, fmt.Sprintf(`UPDATE receipts SET jws = (SELECT jws FROM receipts WHERE call_id = '%s') WHERE call_id = '%s'`, two, one))
	rep, err := receipts.VerifyStored(ctx, a.store)
	if err != nil || len(rep.Failures) != 1 || !strings.Contains(rep.Failures[0], "receipt kept for call "+one+" is the receipt of "+two) {
		t.Fatalf("a receipt moved to another call: %+v %v", rep, err)
	}
}

// The evidence bundle of a call checks with no database and no network,
// and each kind of alteration is named: an event, a link, the checkpoint.
func TestEvidenceBundlesCheckOfflineAndNameEachAlteration(t *testing.T) {
	priv, _, _ := audit.GenerateKey()
	key, err := audit.LoadPrivateKey(string(priv))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	reg, _ := gateAPITools(t)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), AuditKey: key, Checkpoints: dir, Web: web.Config{}}, false)
	ctx := context.Background()
	agentKey, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	refund := callOf(t, a.do("POST", "/api/v1/calls", agentKey, `{"tool":"refund_order","args":{"order_id":"A2","amount":40},"session":"s1"}`))
	id := refund["id"].(string)
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", tok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	a.do("GET", "/api/v1/calls/"+id+"?wait=10s", agentKey, "")
	a.do("POST", "/api/v1/calls", agentKey, `{"tool":"lookup_order","args":{"order_id":"A3"},"session":"s1"}`) // more of the chain
	if _, _, err := audit.Take(ctx, a.store, key, dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	r := a.do("GET", "/api/v1/calls/"+id+"/evidence", tok, "")
	if r.Status != 200 {
		t.Fatalf("evidence: %d %s", r.Status, r.Raw)
	}
	var b receipts.Bundle
	if err := json.Unmarshal([]byte(r.Raw), &b); err != nil {
		t.Fatal(err)
	}
	if b.Checkpoint == nil || len(b.Links) < 4 {
		t.Fatalf("the bundle: checkpoint %v, %d links", b.Checkpoint, len(b.Links))
	}
	if p, problems := receipts.Check(&b, nil); len(problems) != 0 || p.Call != id {
		t.Fatalf("an untouched bundle: %v", problems)
	}
	// Its links are in the chain export's keys; a bundle in the keys
	// bundles had before (Seq, At, PrevHash…) still checks.
	if !strings.Contains(r.Raw, `"prev_hash":`) || strings.Contains(r.Raw, `"PrevHash"`) || strings.Contains(r.Raw, `"Seq"`) {
		t.Fatalf("the links' keys: %.600s", r.Raw[strings.Index(r.Raw, `"links"`):])
	}
	old := r.Raw
	for _, k := range []string{"seq", "at", "actor", "kind", "subject", "payload", "hash"} {
		old = strings.ReplaceAll(old, `{"`+k+`":`, `{"`+strings.ToUpper(k[:1])+k[1:]+`":`)
		old = strings.ReplaceAll(old, `,"`+k+`":`, `,"`+strings.ToUpper(k[:1])+k[1:]+`":`)
	}
	old = strings.ReplaceAll(old, `"prev_hash":`, `"PrevHash":`)
	var ob receipts.Bundle
	if err := json.Unmarshal([]byte(old), &ob); err != nil {
		t.Fatal(err)
	}
	if _, problems := receipts.Check(&ob, nil); len(problems) != 0 || !strings.Contains(old, `"PrevHash":`) {
		t.Fatalf("a bundle in the older keys: %v", problems)
	}
	// The back office links them, and the audit page's filter exports the
	// bundles of the calls it finds, one per line.
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	auditor := a.signIn("aud@x.test")
	if _, page := auditor.get("/actions/" + id); !strings.Contains(page, `data-testid="receipt-link"`) || !strings.Contains(page, `href="/calls/`+id+`/evidence"`) {
		t.Fatal("the action page does not link the receipt and the evidence")
	}
	if _, page := auditor.get("/audit?tool=refund_order"); !strings.Contains(page, `href="/calls/`+id+`/receipt"`) {
		t.Fatal("the audit page does not link the receipt")
	}
	res, lines := auditor.get("/audit/export.evidence?tool=refund_order")
	rows := strings.Split(strings.TrimSpace(lines), "\n")
	if res.StatusCode != 200 || len(rows) != 1 {
		t.Fatalf("the evidence export: %d, %d lines", res.StatusCode, len(rows))
	}
	var exported receipts.Bundle
	if err := json.Unmarshal([]byte(rows[0]), &exported); err != nil {
		t.Fatal(err)
	}
	if _, problems := receipts.Check(&exported, nil); len(problems) != 0 || exported.Call != id {
		t.Fatalf("an exported bundle: %v", problems)
	}
	cp := *b.Checkpoint
	for name, c := range map[string]struct {
		edit func(*receipts.Bundle)
		want string
	}{
		"an event": {func(b *receipts.Bundle) { b.Links[1].Payload = strings.Replace(b.Links[1].Payload, "}", `,"x":1}`, 1) },
			"audit event " + strconv.FormatInt(b.Links[1].Seq, 10) + ": its content does not hash"},
		"a link": {func(b *receipts.Bundle) { b.Links = append(b.Links[:1:1], b.Links[2:]...) }, "a link is missing"},
		"the checkpoint": {func(b *receipts.Bundle) { c := cp; c.Hash = strings.Repeat("0", 64); b.Checkpoint = &c },
			"checkpoint: its signature does not verify"},
		"the receipt": {func(b *receipts.Bundle) {
			b.Receipt = alter(b.Receipt, 1, func(s string) string { return strings.Replace(s, `"status":"succeeded"`, `"status":"failed"`, 1) })
		}, "receipt: the signature does not verify"},
	} {
		var copyB receipts.Bundle
		_ = json.Unmarshal([]byte(r.Raw), &copyB)
		c.edit(&copyB)
		_, problems := receipts.Check(&copyB, nil)
		if !strings.Contains(strings.Join(problems, "\n"), c.want) {
			t.Errorf("%s altered: the check says %q, want %q", name, problems, c.want)
		}
	}
}

// An MCP call's receipt is signed with its outcome, in the unit that
// records it: the answer carries the receipt kept (no second one is
// signed), and it says what the records say.
func TestAnMCPAnswerCarriesTheReceiptSignedWithTheOutcome(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, order := range []string{"A1", "A2", "A3"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": order}})
		if err != nil || res.IsError {
			t.Fatalf("lookup_order %s: %v %v", order, res, err)
		}
		jws, _ := res.Meta["countersign/receipt"].(string)
		calls, _ := a.store.AuditCalls(ctx, models.AuditQuery{Tool: "lookup_order", Limit: 1})
		if len(calls) != 1 {
			t.Fatalf("%d calls recorded", len(calls))
		}
		kept, err := a.store.Receipt(ctx, calls[0].ID)
		if err != nil || kept.JWS != jws {
			t.Fatalf("the answer's receipt is not the one kept (%v):\n%s\n%v", err, jws, kept)
		}
		if f := calls[0].FinishedAt; f == nil || !kept.CreatedAt.Equal(*f) {
			t.Fatalf("the receipt was kept at %v, not with the outcome at %v", kept.CreatedAt, f)
		}
		p, _, err := receipts.Verify(jws, publicKeys(t, a))
		if err != nil || p.Call != calls[0].ID || p.Status != models.CallSucceeded {
			t.Fatalf("the receipt: %+v %v", p, err)
		}
	}
	if rep, err := receipts.VerifyStored(ctx, a.store); err != nil || rep.Receipts < 3 || len(rep.Failures) != 0 {
		t.Fatalf("the receipts against the records: %+v %v", rep, err)
	}
}

func publicKeys(t *testing.T, a *app) jose.JSONWebKeySet {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(a.do("GET", "/api/v1/receipts/keys", "", "").Raw), &set); err != nil {
		t.Fatal(err)
	}
	return set
}
