package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
)

// An admin pastes a candidate policy on /policy and sees which recorded
// decisions it would change; a bad file is said on the page; others may not.
func TestPolicyPageReplaysACandidate(t *testing.T) {
	a := newApp(t)
	action := a.pendingRefund("it arrived broken") // needs a person under the demo policy
	a.staff(models.Admin, "ada@x.test", "Ada")
	a.staff(models.Approver, "ann@x.test", "Ann")
	ada := a.signIn("ada@x.test")
	if _, page := ada.get("/policy"); !strings.Contains(page, "Try a policy before it rules") {
		t.Fatal("the admin's policy page has no replay form")
	}
	candidate := "rules:\n  - name: no-refunds\n    tool: issue_refund\n    decision: deny\n    reason: \"<b>paused</b>\"\n"
	res, page := ada.post("/policy/replay", url.Values{"csrf": {ada.csrf}, "policy": {candidate}, "since": {"24h"}})
	changes := between(page, `data-testid="replay-changes"`, "</table>")
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="replay"`) || !strings.Contains(changes, "<td><code>issue_refund</code></td>") ||
		!strings.Contains(changes, `href="/actions/`+action.ID+`">Refund $900.00 on order A1002</a>`) || strings.Contains(page, "<b>paused</b>") {
		t.Fatalf("replay: %d\n%s", res.StatusCode, changes)
	}
	if !strings.Contains(changes, "needs_approval (1)") || !strings.Contains(changes, "deny") || !strings.Contains(changes, "<code>no-refunds</code>") {
		t.Fatalf("the change does not say what was decided then, and what would be, by which rules:\n%s", changes)
	}
	res, page = ada.post("/policy/replay", url.Values{"csrf": {ada.csrf}, "policy": {"rules: [oops"}, "since": {"24h"}})
	if res.StatusCode != 422 || !strings.Contains(page, `data-testid="replay-error">The candidate policy: `) || strings.Contains(page, "policy the candidate") {
		t.Fatalf("a bad file: %d\n%s", res.StatusCode, between(page, `data-testid="replay-error"`, "</p>"))
	}
	if res, _ := ada.post("/policy/replay", url.Values{"policy": {candidate}}); res.StatusCode != 403 {
		t.Fatalf("without the CSRF token: %d", res.StatusCode)
	}
	ann := a.signIn("ann@x.test")
	if res, _ := ann.post("/policy/replay", url.Values{"csrf": {ann.csrf}, "policy": {candidate}}); res.StatusCode != 403 {
		t.Fatalf("an approver replayed a policy: %d", res.StatusCode)
	}
	if _, page := ann.get("/policy"); strings.Contains(page, "Try a policy before it rules") {
		t.Fatal("the replay form is shown to an approver")
	}
}

// A shadow policy decides beside the one in force: nothing follows from
// it, and /policy shows where it disagreed, with the calls.
func TestShadowPolicyDisagreementsShowOnThePolicyPage(t *testing.T) {
	a := newApp(t)
	shadow, err := policy.LoadPolicy([]byte("rules:\n  - name: no-refunds\n    tool: issue_refund\n    decision: deny\n    reason: paused\n"),
		"shadow.yaml", a.gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	a.gate.SetShadow(shadow)
	action := a.pendingRefund("it arrived broken") // the model also looks the order up first: an allowed read
	if c, _ := a.store.ToolCall(context.Background(), action.ID); c.Status != models.CallPending {
		t.Fatalf("the shadow changed the decision in force: %s", c.Status)
	}
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	_, page := a.signIn("aud@x.test").get("/policy")
	if !strings.Contains(page, "Shadow policy") || !strings.Contains(page, "shadow.yaml") || !strings.Contains(page, `data-testid="shadow"`) ||
		!strings.Contains(page, action.ID) || !strings.Contains(page, "<td>deny</td>") {
		t.Fatalf("the policy page does not show the shadow's disagreement:\n%s", page)
	}
	counts, err := a.store.ShadowDisagreements(context.Background(), shadow.Version())
	if err != nil || len(counts) != 1 || counts[0].Count != 1 || counts[0].Shadow != "deny" {
		t.Fatalf("disagreements: %+v %v (the read it agreed on is not one)", counts, err)
	}
}
