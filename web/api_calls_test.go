package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
	"github.com/countersign/countersign/web"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gateAPIApp serves the default policy over a business's own tools: a read
// and a refund on a backend on a port, and a decision-only escalation.
func gateAPIApp(t *testing.T) (*app, *atomic.Int32) {
	t.Helper()
	return gateAPIAppWith(t, nil)
}

// gateAPIAppWith is gateAPIApp with the server's configuration changed.
func gateAPIAppWith(t *testing.T, configure func(*web.Config)) (*app, *atomic.Int32) {
	t.Helper()
	reg, refunds := gateAPITools(t)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	var cfg web.Config
	if configure != nil {
		configure(&cfg)
	}
	return startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog(), Web: cfg}, false), refunds
}

// gateAPITools are those tools, and how many refunds their backend made.
func gateAPITools(t *testing.T) (*tools.Registry, *atomic.Int32) {
	t.Helper()
	var refunds atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			refunds.Add(1)
			_, _ = w.Write([]byte(`{"refund_id":"rf_1","key":"` + r.Header.Get("Idempotency-Key") + `"}`))
			return
		}
		_, _ = w.Write([]byte(`{"order_id":"` + strings.TrimPrefix(r.URL.Path, "/orders/") + `","status":"delivered"}`))
	}))
	t.Cleanup(backend.Close)
	set, err := httptool.Load([]byte(`tools:
  - name: lookup_order
    risk: read
    idempotent: true
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "`+backend.URL+`/orders/{order_id}"}
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number, exclusiveMinimum: 0}}, required: [order_id, amount], additionalProperties: false}
    amount: amount
    http: {method: POST, url: "`+backend.URL+`/refunds"}
  - name: escalate_to_human
    risk: low_write
    input_schema: {type: object, properties: {why: {type: string}}, required: [why], additionalProperties: false}
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return reg, &refunds
}

func callOf(t *testing.T, r apiResp) map[string]any {
	t.Helper()
	c, ok := r.Body["call"].(map[string]any)
	if !ok {
		t.Fatalf("no call in %d %s", r.Status, r.Raw)
	}
	return c
}

func TestGateAPIEndToEnd(t *testing.T) {
	a, refunds := gateAPIApp(t)
	ctx := context.Background()
	key, _, err := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, _ := a.accounts.AddAgent(ctx, "other-bot", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})

	// An allowed read runs at once and answers with the backend's JSON.
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A7"},"session":"conv-1","customer_id":"cus_1"}`)
	c := callOf(t, r)
	if r.Status != 201 || c["status"] != "succeeded" || c["decision"].(map[string]any)["verdict"] != "allow" ||
		c["result"].(map[string]any)["order_id"] != "A7" || c["decision"].(map[string]any)["policy_version"] == "" {
		t.Fatalf("allowed read: %d %s", r.Status, r.Raw)
	}
	// Answered as the gate committed it, without reading it back: the
	// same call, field for field, as reading it from the database shows.
	if again := callOf(t, a.do("GET", "/api/v1/calls/"+c["id"].(string), key, "")); !reflect.DeepEqual(again, c) {
		t.Fatalf("the call as answered:\n%v\nas read back:\n%v", c, again)
	}

	// A refund waits for a person; approved through the staff API, the
	// long poll answers with the result.
	r = a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A7","amount":900},"session":"conv-1","customer_id":"cus_1","context":"customer says <b>broken</b>"}`)
	pending := callOf(t, r)
	if r.Status != 201 || pending["status"] != "pending" || refunds.Load() != 0 {
		t.Fatalf("refund: %d %s (backend saw %d)", r.Status, r.Raw, refunds.Load())
	}
	id := pending["id"].(string)
	done := make(chan apiResp, 1)
	go func() { done <- a.do("GET", "/api/v1/calls/"+id+"?wait=20s", key, "") }()
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", staffTok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	r = <-done
	if c := callOf(t, r); c["status"] != "succeeded" || c["result"].(map[string]any)["refund_id"] != "rf_1" || refunds.Load() != 1 {
		t.Fatalf("long poll after approval: %s (backend saw %d)", r.Raw, refunds.Load())
	}
	// The approver saw the agent's context, escaped.
	call, _ := a.store.ToolCall(ctx, id)
	if call.Context != "customer says <b>broken</b>" {
		t.Fatalf("context %q", call.Context)
	}

	// Rejected: the agent learns the reason.
	r = a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A8","amount":50},"session":"conv-1","customer_id":"cus_1"}`)
	id2 := callOf(t, r)["id"].(string)
	if r := a.do("POST", "/api/v1/actions/"+id2+"/reject", staffTok, `{"reason":"not eligible"}`); r.Status != 200 {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	if c := callOf(t, a.do("GET", "/api/v1/calls/"+id2+"?wait=1s", key, "")); c["status"] != "rejected" || !strings.Contains(c["error"].(string), "not eligible") {
		t.Fatalf("rejected: %v", c)
	}

	// Invalid arguments and unknown tools are recorded invalid, with why.
	if c := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A8","amount":-5},"session":"conv-1","customer_id":"cus_1"}`)); c["status"] != "invalid" || !strings.Contains(c["error"].(string), "amount") {
		t.Fatalf("invalid args: %v", c)
	}
	if c := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"wire_money","args":{},"session":"conv-1","customer_id":"cus_1"}`)); c["status"] != "invalid" || !strings.Contains(c["error"].(string), "no tool named") {
		t.Fatalf("unknown tool: %v", c)
	}

	// Another agent cannot see the call; a missing session is refused.
	if r := a.do("GET", "/api/v1/calls/"+id, otherKey, ""); r.Status != 404 {
		t.Fatalf("another agent's call: %d", r.Status)
	}
	if r := a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A7"}}`); r.Status != 400 || !strings.Contains(r.Raw, "session is required") {
		t.Fatalf("no session: %d %s", r.Status, r.Raw)
	}
	// A staff token is not an agent key.
	if r := a.do("POST", "/api/v1/calls", staffTok, `{"tool":"lookup_order","args":{"order_id":"A7"},"session":"s"}`); r.Status != 401 {
		t.Fatalf("staff token as agent key: %d", r.Status)
	}

	// The same Idempotency-Key gives back the same call, not a second one.
	first := a.doWith("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A9","amount":700},"session":"conv-2"}`, "Idempotency-Key", "retry-1")
	again := a.doWith("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A9","amount":700},"session":"conv-2"}`, "Idempotency-Key", "retry-1")
	if first.Status != 201 || again.Status != 200 || callOf(t, first)["id"] != callOf(t, again)["id"] {
		t.Fatalf("idempotency: %d %s / %d %s", first.Status, first.Raw, again.Status, again.Raw)
	}
	// The same request with its keys in another order and spacing is the same.
	again = a.doWith("POST", "/api/v1/calls", key, `{"session":"conv-2", "args":{"amount":700, "order_id":"A9"},"tool":"refund_order"}`, "Idempotency-Key", "retry-1")
	if again.Status != 200 || callOf(t, again)["id"] != callOf(t, first)["id"] || callOf(t, again)["session"] != "conv-2" {
		t.Fatalf("the same request reordered: %d %s", again.Status, again.Raw)
	}
	// The key used again for another request is refused, whatever differs,
	// and nothing new is asked: no second action waits.
	waiting := func() int {
		n, err := a.store.CountPendingActions(ctx, models.ActionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	}
	pendingBefore := waiting()
	for body, differs := range map[string]string{
		`{"tool":"lookup_order","args":{"order_id":"A9"},"session":"conv-2"}`:                                    "whose tool and args differed",
		`{"tool":"refund_order","args":{"order_id":"A9","amount":7000},"session":"conv-2"}`:                      "whose args differed",
		`{"tool":"refund_order","args":{"order_id":"A9","amount":700},"session":"conv-9"}`:                       "whose session differed",
		`{"tool":"refund_order","args":{"order_id":"A9","amount":700},"session":"conv-2","customer_id":"cus_2"}`: "whose customer_id differed",
	} {
		r := a.doWith("POST", "/api/v1/calls", key, body, "Idempotency-Key", "retry-1")
		if r.Status != 409 || !strings.Contains(r.Raw, "already used for call "+callOf(t, first)["id"].(string)+", "+differs+";") {
			t.Fatalf("key reused for %s: %d %s", body, r.Status, r.Raw)
		}
	}
	if n := waiting(); n != pendingBefore {
		t.Fatalf("%d actions wait after the refused reuses, %d before", n, pendingBefore)
	}

	// A decision-only tool: allowed, carried out by the agent, reported once.
	r = a.do("POST", "/api/v1/calls", key, `{"tool":"escalate_to_human","args":{"why":"angry"},"session":"conv-1","customer_id":"cus_1"}`)
	esc := callOf(t, r)
	if esc["status"] != "allowed" {
		t.Fatalf("decision-only: %s", r.Raw)
	}
	rep := a.do("POST", "/api/v1/calls/"+esc["id"].(string)+"/result", key, `{"ok":true,"result":{"ticket":"T-1"}}`)
	if c := callOf(t, rep); c["status"] != "succeeded" || c["result"].(map[string]any)["ticket"] != "T-1" {
		t.Fatalf("report: %d %s", rep.Status, rep.Raw)
	}
	if r := a.do("POST", "/api/v1/calls/"+esc["id"].(string)+"/result", key, `{"ok":false,"error":"twice"}`); r.Status != 409 {
		t.Fatalf("second report: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/calls/"+id+"/result", key, `{"ok":true}`); r.Status != 409 {
		t.Fatalf("report on a call Countersign ran: %d %s", r.Status, r.Raw)
	}

	// A revoked key stops at once.
	if _, err := a.accounts.RevokeAgent(ctx, "support-bot", models.Actor{ID: "test"}); err != nil {
		t.Fatal(err)
	}
	if r := a.do("GET", "/api/v1/calls/"+id, key, ""); r.Status != 401 {
		t.Fatalf("revoked key: %d", r.Status)
	}
	if n := refunds.Load(); n != 1 {
		t.Fatalf("the backend was sent %d refunds; only one was approved", n)
	}
}

// Approvers see who asked and what the agent said, escaped; admins see the
// agents on the staff page.
func TestAgentCallsShowInTheBackOffice(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A7","amount":900},"session":"conv-9","customer_id":"cus_1","context":"<script>alert(1)</script> wants it today"}`)
	id := callOf(t, r)["id"].(string)
	a.staff(models.Admin, "ada@x.test", "Ada")
	b := a.signIn("ada@x.test")
	_, page := b.get("/queue")
	if !strings.Contains(page, "via agent support-bot") {
		t.Fatalf("queue does not say which agent asked:\n%s", page)
	}
	_, page = b.get("/actions/" + id)
	if !strings.Contains(page, "conv-9") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt; wants it today") || strings.Contains(page, "<script>alert(1)") {
		t.Fatalf("action page: agent, session or context missing or unescaped:\n%s", page)
	}
	_, page = b.get("/staff")
	if !strings.Contains(page, "support-bot") || !strings.Contains(page, "works") {
		t.Fatalf("staff page does not list the agent:\n%s", page)
	}
}

// A tools file's secrets reach no page, export or API answer, even when the
// backend echoes them back.
func TestToolSecretsReachNoPage(t *testing.T) {
	const headerSecret, signingSecret = "hdr-secret-7f3a9c", "sig-secret-2b8e41"
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"order_id":"A7","echo":"` + r.Header.Get("Authorization") + `"}`))
	}))
	t.Cleanup(backend.Close)
	set, err := httptool.Load([]byte(`tools:
  - name: lookup_order
    risk: read
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "`+backend.URL+`/orders/{order_id}", headers: {Authorization: "Bearer ${KEY}"}}
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "`+backend.URL+`/refunds", secret: "${SIG}", headers: {Authorization: "Bearer ${KEY}"}}
    review: [{tool: lookup_order, label: Order, args: {order_id: "{order_id}"}}]
`), "tools.yaml", httptool.Options{Env: func(k string) (string, bool) {
		return map[string]string{"KEY": headerSecret, "SIG": signingSecret}[k], true
	}})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog()}, false)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	var answers []string
	read := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A7"},"session":"s1"}`))
	raw, _ := json.Marshal(read)
	answers = append(answers, string(raw))
	if !strings.Contains(string(raw), "[secret]") {
		t.Fatalf("the backend's echo was not redacted: %s", raw)
	}
	pending := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A7","amount":900},"session":"s1"}`))
	id := pending["id"].(string)
	a.staff(models.Admin, "ada@x.test", "Ada")
	b := a.signIn("ada@x.test")
	call, _ := a.store.ToolCall(ctx, id)
	for _, path := range []string{"/queue", "/actions/" + id, "/actions/" + read["id"].(string), "/tools", "/policy", "/audit", "/runs",
		"/runs/" + call.RunID, "/audit/export.jsonl", "/audit/export.csv", "/audit/chain.jsonl", "/staff",
		"/calls/" + read["id"].(string) + "/evidence", "/calls/" + read["id"].(string) + "/receipt", "/audit/export.evidence"} {
		res, page := b.get(path)
		if res.StatusCode != 200 {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		answers = append(answers, page)
		if path == "/actions/"+id && !strings.Contains(page, "Order: order id") {
			t.Fatalf("the review lookup did not run on the action page:\n%s", page)
		}
	}
	for i, text := range answers {
		if strings.Contains(text, headerSecret) || strings.Contains(text, signingSecret) {
			t.Fatalf("answer %d holds a secret:\n%s", i, text)
		}
	}
}

// The gate API joins the same call as MCP does: the same write of an agent
// for the same customer, asked again from another session while it waits,
// is that call (200, its own session); once decided, asking again is that
// outcome, a replay, and a new Idempotency-Key asks for a second action.
func TestGateAPIJoinsTheSameCall(t *testing.T) {
	a, refunds := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	ask := func(session string) apiResp {
		return a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A5","amount":900},"session":"`+session+`","customer_id":"cus_5"}`)
	}
	first := ask("conv-1")
	again := ask("conv-2")
	if first.Status != 201 || again.Status != 200 || callOf(t, again)["id"] != callOf(t, first)["id"] || callOf(t, again)["session"] != "conv-1" {
		t.Fatalf("the same write from another session: %d %s / %d %s", first.Status, first.Raw, again.Status, again.Raw)
	}
	// Another customer's identical request is another call.
	if r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A5","amount":900},"session":"conv-3","customer_id":"cus_6"}`); r.Status != 201 {
		t.Fatalf("another customer's: %d %s", r.Status, r.Raw)
	}
	id := callOf(t, first)["id"].(string)
	if r := a.do("POST", "/api/v1/actions/"+id+"/approve", tok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	if c := callOf(t, a.do("GET", "/api/v1/calls/"+id+"?wait=10s", key, "")); c["status"] != "succeeded" {
		t.Fatalf("the outcome: %v", c)
	}
	if r := ask("conv-2"); r.Status != 200 || callOf(t, r)["id"] != id || callOf(t, r)["replay"] != true || refunds.Load() != 1 {
		t.Fatalf("after the outcome was handed over: %d %s (%d refunds)", r.Status, r.Raw, refunds.Load())
	}
	body := `{"tool":"refund_order","args":{"order_id":"A5","amount":900},"session":"conv-2","customer_id":"cus_5"}`
	if r := a.doWith("POST", "/api/v1/calls", key, body, "Idempotency-Key", "second-refund"); r.Status != 201 || callOf(t, r)["id"] == id {
		t.Fatalf("a new Idempotency-Key after the outcome: %d %s", r.Status, r.Raw)
	}
}

// Both doors say an outcome in the same words: the gate API's `told` is
// what an MCP client reads for the same call.
func TestBothDoorsTellAnOutcomeAlike(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	call := callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A8","amount":30},"session":"s1"}`))
	if !strings.HasPrefix(fmt.Sprint(call["told"]), "Waiting for a person to decide (call "+call["id"].(string)) {
		t.Fatalf("told while it waits: %v", call["told"])
	}
	if r := a.do("POST", "/api/v1/actions/"+call["id"].(string)+"/reject", tok, `{"reason":"not ours to refund"}`); r.Status != 200 {
		t.Fatalf("reject: %d %s", r.Status, r.Raw)
	}
	told := callOf(t, a.do("GET", "/api/v1/calls/"+call["id"].(string), key, ""))["told"]
	if told != "Rejected by a person: not ours to refund" {
		t.Fatalf("told after the rejection: %v", told)
	}
	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A8", "amount": 30}})
	if err != nil || !res.IsError || textOf(res) != told {
		t.Fatalf("the MCP client read %q, the gate API said %q (%v)", textOf(res), told, err)
	}
}
