package web_test

import (
	"net/url"
	"strings"
	"testing"

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
	if res.StatusCode != 200 || !strings.Contains(page, `data-testid="replay"`) || !strings.Contains(page, "<td>deny</td>") ||
		!strings.Contains(page, action.ID) || strings.Contains(page, "<b>paused</b>") {
		t.Fatalf("replay: %d\n%s", res.StatusCode, page)
	}
	if !strings.Contains(page, "needs_approval (1)") {
		t.Fatalf("the change does not say what was decided then:\n%s", page)
	}
	res, page = ada.post("/policy/replay", url.Values{"csrf": {ada.csrf}, "policy": {"rules: [oops"}, "since": {"24h"}})
	if res.StatusCode != 422 || !strings.Contains(page, `data-testid="replay-error"`) {
		t.Fatalf("a bad file: %d\n%s", res.StatusCode, page)
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
