package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// shopBackend is an order system that answers what was refunded so far,
// and deduplicates requests by Idempotency-Key the way the README invites:
// a key it has seen gets the answer it gave then.
type shopBackend struct {
	mu       sync.Mutex
	refunded int
	lookups  []string // the Idempotency-Key of each lookup ("" for none)
	answered map[string]string
}

func (b *shopBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	key := r.Header.Get("Idempotency-Key")
	if r.Method == http.MethodGet {
		b.lookups = append(b.lookups, key)
	}
	if old, ok := b.answered[key]; ok && key != "" {
		_, _ = w.Write([]byte(old))
		return
	}
	answer := `{"ok":true}`
	switch {
	case r.Method == http.MethodGet:
		answer = `{"refunded_so_far":` + itoa(b.refunded) + `}`
	default:
		b.refunded += 900
	}
	if key != "" {
		b.answered[key] = answer
	}
	_, _ = w.Write([]byte(answer))
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The facts an approver was shown are the ones their decision keeps: the
// decided action shows them, not what a lookup says after the refund ran,
// and the audit chain holds them. Lookups carry no Idempotency-Key, so a
// deduplicating backend answers each view afresh; a review that is not the
// decider's own of this action is refused.
func TestTheDecisionKeepsWhatTheApproverSaw(t *testing.T) {
	backend := &shopBackend{answered: map[string]string{}}
	srv := httptest.NewServer(backend)
	t.Cleanup(srv.Close)
	set, err := httptool.Load([]byte(`tools:
  - name: order_refunds
    risk: read
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    http: {method: GET, url: "`+srv.URL+`/orders/{order_id}"}
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "`+srv.URL+`/refunds"}
    review: [{tool: order_refunds, label: Order, args: {order_id: "{order_id}"}}]
`), "tools.yaml", httptool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, _ := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	a := startApp(t, appConfig{Store: openStore(t), Tools: reg, Policy: pol, Log: discardLog()}, false)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	ask := func(order string) string {
		t.Helper()
		return callOf(t, a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"`+order+`","amount":900},"session":"s-`+order+`"}`))["id"].(string)
	}
	first, other := ask("A7"), ask("A8")
	a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Approver, "ben@x.test", "Ben")
	ann, ben := a.signIn("ann@x.test"), a.signIn("ben@x.test")

	_, page := ann.get("/actions/" + first)
	if !strings.Contains(page, "<dd>0</dd>") {
		t.Fatalf("the approver is not shown what was refunded so far:\n%s", between(page, `data-testid="context"`, "</dl>"))
	}
	_, again := ann.get("/actions/" + first)
	review := formValue(page, "review")
	if review == "" || review == formValue(again, "review") {
		t.Fatalf("each view is its own review: %q, then %q", review, formValue(again, "review"))
	}
	// Someone else's review, or one of another action, is not what Ben saw.
	_, benPage := ben.get("/actions/" + other)
	res, _ := ben.post("/actions/"+first+"/approve", url.Values{"csrf": {ben.csrf}, "review": {review}})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("Ben approved with Ann's review: %d", res.StatusCode)
	}
	res, _ = ben.post("/actions/"+first+"/reject", url.Values{"csrf": {ben.csrf}, "review": {formValue(benPage, "review")}, "reason": {"no"}})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("Ben rejected with his review of another action: %d", res.StatusCode)
	}

	res, _ = ann.post("/actions/"+first+"/approve", url.Values{"csrf": {ann.csrf}, "review": {review}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("Ann's approval: %d", res.StatusCode)
	}
	backend.mu.Lock()
	refunded, lookups := backend.refunded, len(backend.lookups)
	for _, k := range backend.lookups {
		if k != "" {
			t.Errorf("a lookup carried Idempotency-Key %q", k)
		}
	}
	backend.mu.Unlock()
	if refunded != 900 {
		t.Fatalf("the refund did not run: %d", refunded)
	}
	_, decided := ann.get("/actions/" + first)
	seen := between(decided, `data-testid="seen"`, "</dl>")
	if !strings.Contains(decided, "What Ann was shown before deciding") || !strings.Contains(seen, "<dd>0</dd>") || strings.Contains(decided, "<dd>900</dd>") {
		t.Fatalf("the decided action does not show what Ann saw (refunded so far 0): %q", seen)
	}
	backend.mu.Lock()
	after := len(backend.lookups)
	backend.mu.Unlock()
	if after != lookups {
		t.Errorf("the decided action looked the facts up again (%d lookups, then %d)", lookups, after)
	}
	events, err := a.store.AuditEventsFor(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	var kept bool
	for _, e := range events {
		if e.Kind == models.EventActionApproved {
			var p models.ActionApprovalPayload
			kept = json.Unmarshal([]byte(e.Payload), &p) == nil && len(p.Seen) > 0 && p.Seen[0].Value == "0"
		}
	}
	if !kept {
		t.Fatalf("the audit chain does not keep what Ann saw: %+v", events)
	}
	// The audit page shows it too, beside who decided.
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	_, audit := a.signIn("aud@x.test").get("/audit")
	if kept := between(audit, `data-testid="audit-seen"`, "</details>"); !strings.Contains(kept, "Ann:") || !strings.Contains(kept, "<dd>0</dd>") {
		t.Errorf("the audit page does not show what Ann was shown: %q", kept)
	}
}

// formValue is the value of the first hidden input named name on a page.
func formValue(page, name string) string {
	_, rest, ok := strings.Cut(page, `name="`+name+`" value="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}
