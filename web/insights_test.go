package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/web/chat"
)

const insightsPolicy = `rules:
  - name: small-refund
    tool: refund_order
    when: args.amount <= 50
    decision: allow
    reason: small refunds go through
  - name: refund-needs-approval
    tool: refund_order
    decision: needs_approval
    reason: a person decides
  - name: escalations-need-a-look
    tool: escalate_to_human
    decision: needs_approval
    reason: a person looks first
tests:
  - name: a $20 refund is allowed
    tool: refund_order
    args: {order_id: A1, amount: 20}
    expect: allow
`

// A seeded history with known numbers: 22 refunds held and all approved
// unedited by Bob after 40 s each, 3 small ones allowed, 20 escalations
// that Carol decided in 2 s each, half of them rejected. Insights count
// exactly that; a suggestion appears for the refunds and none for the
// escalations; adopting it proposes a draft whose replay changes exactly
// the 22 refunds it named.
func TestInsightsOfASeededHistory(t *testing.T) {
	store := openStore(t)
	var mu sync.Mutex
	now := time.Now().Add(-2 * time.Hour)
	store.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	wait := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	reg, _ := gateAPITools(t)
	p, err := policy.LoadPolicy([]byte(insightsPolicy), "insights.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	a := startApp(t, appConfig{Store: store, Tools: reg, Policy: p, Model: offline.Model{}, Log: discardLog(),
		Web: web.Config{Customers: chat.NewCustomerVerifier(secret)}}, false)
	ctx := context.Background()
	bob := a.staff(models.Supervisor, "bob@shop.test", "Bob")
	carol := a.staff(models.Approver, "carol@shop.test", "Carol")
	a.staff(models.Admin, "ada@shop.test", "Ada")
	ann := a.apiToken(models.Auditor, "ann@shop.test", "Ann")
	amy := a.apiToken(models.Approver, "amy@shop.test", "Amy")

	run := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_x", CustomerName: "X", Channel: "api", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	call := func(tool, args string) gate.Outcome {
		t.Helper()
		out, err := a.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: "cus_x", Tool: tool, Args: []byte(args)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var refunds []string
	for i := range 22 {
		out := call("refund_order", fmt.Sprintf(`{"order_id":"B%d","amount":%d}`, i, 60+i))
		if out.Status != models.CallPending {
			t.Fatalf("refund %d: %s", i, out.Status)
		}
		refunds = append(refunds, out.CallID)
		wait(40 * time.Second)
		if _, err := a.gate.Approve(ctx, out.CallID, bob.Actor(), gate.ApproveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if out := call("refund_order", fmt.Sprintf(`{"order_id":"S%d","amount":20}`, i)); out.Status != models.CallSucceeded {
			t.Fatalf("a small refund: %s", out.Status)
		}
	}
	for i := range 20 {
		out := call("escalate_to_human", fmt.Sprintf(`{"why":"case %d"}`, i))
		wait(2 * time.Second)
		if i%2 == 0 {
			_, err = a.gate.Approve(ctx, out.CallID, carol.Actor(), gate.ApproveRequest{})
		} else {
			err = a.gate.Reject(ctx, out.CallID, carol.Actor(), "no")
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	if r := a.do("GET", "/api/v1/insights?since=720h", amy, ""); r.Status != 403 {
		t.Fatalf("an approver read insights: %d", r.Status)
	}
	// The calls of past hours are counted by the audit log's follower, a
	// core job: the insights say as of when, and catch up within moments.
	mu.Lock()
	last := now.Truncate(time.Microsecond)
	mu.Unlock()
	var r apiResp
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r = a.do("GET", "/api/v1/insights?since=720h", ann, "")
		if r.Status != 200 {
			t.Fatalf("insights: %d %s", r.Status, r.Raw)
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(r.Body["counted_at"]))
		if !at.Before(last) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the insights never caught up with the calls: counted as of %v, the last call at %v", r.Body["counted_at"], last)
		}
	}
	rules := map[string]map[string]any{}
	for _, x := range r.Body["rules"].([]any) {
		m := x.(map[string]any)
		rules[m["rule"].(string)] = m
	}
	want := map[string]map[string]any{
		"refund-needs-approval":   {"tool": "refund_order", "calls": 22.0, "held": 22.0, "approved": 22.0, "edited": 0.0, "rejected": 0.0, "expired": 0.0, "decision_p50_s": 40.0, "decision_p90_s": 40.0},
		"small-refund":            {"calls": 3.0, "allowed": 3.0, "held": 0.0, "decision_p50_s": nil},
		"escalations-need-a-look": {"calls": 20.0, "held": 20.0, "approved": 10.0, "rejected": 10.0, "decision_p50_s": 2.0, "decision_p90_s": 2.0},
	}
	for rule, fields := range want {
		for k, v := range fields {
			if rules[rule][k] != v {
				t.Errorf("%s %s: %v, want %v", rule, k, rules[rule][k], v)
			}
		}
	}
	people := map[string]map[string]any{}
	for _, x := range r.Body["approvers"].([]any) {
		m := x.(map[string]any)
		people[m["name"].(string)] = m
	}
	if b := people["Bob"]; b["decisions"] != 22.0 || b["share_approved"] != 1.0 || b["under_3s"] != 0.0 || b["median_s"] != 40.0 {
		t.Errorf("Bob: %v", b)
	}
	if c := people["Carol"]; c["decisions"] != 20.0 || c["share_approved"] != 0.5 || c["under_3s"] != 20.0 || c["share_under_3s"] != 1.0 {
		t.Errorf("Carol: %v", c)
	}
	sugs := r.Body["suggestions"].([]any)
	if len(sugs) != 1 {
		t.Fatalf("suggestions: %d, want one (for the refunds, none for the mixed escalations): %s", len(sugs), r.Raw)
	}
	sg := sugs[0].(map[string]any)
	ev := sg["evidence"].(map[string]any)
	var named []string
	for _, id := range ev["calls"].([]any) {
		named = append(named, id.(string))
	}
	if sg["rule"] != "refund-needs-approval" || ev["up_to"] != 81.0 || !slices.Equal(named, refunds) || ev["calls_total"] != 22.0 ||
		!strings.Contains(sg["text"].(string), "22 of 22") || !strings.Contains(sg["text"].(string), "median 40 s") {
		t.Fatalf("the suggestion: %v", sg)
	}

	// The page, and adopting the suggestion as a draft version.
	admin := a.signIn("ada@shop.test")
	if res, page := admin.get("/insights?since=720h"); res.StatusCode != 200 || !strings.Contains(page, "22 of 22") || !strings.Contains(page, "rubber stamp?") ||
		!strings.Contains(page, "Calls of past hours counted as of "+last.Format("2006-01-02 15:04:05")+" UTC") {
		t.Fatalf("insights page: %d (or it does not say how fresh its counts are)", res.StatusCode)
	}
	adopt := "/insights/suggestions/" + sg["id"].(string) + "/adopt"
	if res, _ := admin.post(adopt, url.Values{"since": {"720h"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("adopted without CSRF: %d", res.StatusCode)
	}
	res, body := admin.post(adopt, url.Values{"since": {"720h"}, "csrf": {admin.csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("adopt: %d %s", res.StatusCode, body)
	}
	id := strings.TrimPrefix(strings.SplitN(res.Header.Get("Location"), "?", 2)[0], "/policy/versions/")
	adminToken, err := a.accounts.CreateAPIToken(ctx, "ada@shop.test", models.Actor{ID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	v := versionOf(t, a.do("GET", "/api/v1/policy/versions/"+id, adminToken, ""))
	replay := v["replay"].(map[string]any)
	changes := replay["changes"].([]any)
	if v["status"] != "proposed" || len(changes) != 1 || replay["calls"].(float64)-replay["unchanged"].(float64) != 22 {
		t.Fatalf("the draft's replay: %v", replay)
	}
	ch := changes[0].(map[string]any)
	if ch["count"] != 22.0 || ch["from_rule"] != "refund-needs-approval" || ch["to"] != "allow" {
		t.Fatalf("the draft's change: %v", ch)
	}
	for _, ex := range ch["examples"].([]any) {
		if !slices.Contains(refunds, ex.(map[string]any)["id"].(string)) {
			t.Fatalf("the replay changed a call the suggestion did not name: %v", ex)
		}
	}
}
