package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/views"
)

// A supervisor approving a refund also allows Alice's next refunds within
// a bound; only supervisors are offered it and can send it; the grant is
// listed on /policy with its use, and revoking it there (CSRF, supervisor)
// makes the next refund wait again.
func TestStandingGrantFromTheActionPageToPolicy(t *testing.T) {
	a := newApp(t)
	a.staff(models.Supervisor, "sue@x.test", "Sue")
	a.staff(models.Approver, "ann@x.test", "Ann")
	a.staff(models.Auditor, "otto@x.test", "Otto")
	sue, ann, otto := a.signIn("sue@x.test"), a.signIn("ann@x.test"), a.signIn("otto@x.test")

	first := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":100,"reason":"broken"}`)
	if first.Status != models.CallPending {
		t.Fatalf("first refund: %+v", first)
	}
	page := views.ActionPath(first.CallID)
	if _, body := ann.get(page); strings.Contains(body, `data-testid="grant"`) {
		t.Fatal("an approver is offered a standing grant")
	}
	_, body := sue.get(page)
	if !strings.Contains(body, `data-testid="grant"`) || !strings.Contains(body, "Also allow this for Alice") {
		t.Fatal("the supervisor is not offered a standing grant")
	}
	if strings.Contains(body, "granted-by") {
		t.Fatal("a call the policy sent to a person is shown as allowed by a grant")
	}
	approve := views.Reverse(views.PathActionApprove, first.CallID)
	grant := func(b *browser, uses, amount string) (*http.Response, string) {
		return b.post(approve, url.Values{"csrf": {b.csrf}, "note": {"loyal customer"}, "grant": {"1"}, "grant_uses": {uses},
			"grant_amount": {amount}, "grant_for": {"24h"}})
	}
	if res, body := grant(ann, "2", ""); res.StatusCode != http.StatusForbidden || !strings.Contains(body, "nly a supervisor or an admin") {
		t.Fatalf("an approver sending a grant: %d", res.StatusCode)
	}
	res, body := grant(sue, "two", "")
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "whole number") || !strings.Contains(body, `value="two"`) {
		t.Fatalf("a bad count: %d %s", res.StatusCode, body)
	}
	if st, n := a.approvalsOf(first.CallID); st != models.CallPending || n != 0 {
		t.Fatalf("refused grants changed the action: %s, %d approvals", st, n)
	}

	res, _ = grant(sue, "2", "250")
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "grant=grant_") {
		t.Fatalf("approve with a grant: %d %s", res.StatusCode, loc)
	}
	_, body = sue.get(loc)
	if !strings.Contains(body, "Standing grant given: later issue_refund calls for Alice") || !strings.Contains(body, "up to 2 calls, up to $250.00 in all") {
		t.Fatalf("the flash after approving with a grant:\n%s", body)
	}
	grantID := strings.SplitN(strings.SplitN(loc, "grant=", 2)[1], "&", 2)[0]

	second := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":100,"reason":"broken too"}`)
	if second.Status != models.CallSucceeded || second.Decision.Rule != gate.GrantRule+grantID {
		t.Fatalf("the next refund under the grant: %+v", second)
	}
	if _, body := otto.get(views.ActionPath(second.CallID)); !strings.Contains(body, `href="/policy#`+grantID+`"`) {
		t.Fatal("the granted call's page does not link its grant")
	}

	_, body = otto.get(views.PathPolicy)
	row := grantRow(t, body, grantID)
	for _, want := range []string{"Alice", "issue_refund", "1 of 2 calls used, $100.00 of $250.00 used", "Sue", "loyal customer", `data-state="active"`} {
		if !strings.Contains(row, want) {
			t.Errorf("the grant's row lacks %q:\n%s", want, row)
		}
	}
	if strings.Contains(row, "revoke-grant") {
		t.Error("an auditor is offered to revoke")
	}
	_, body = sue.get(views.PathPolicy)
	if !strings.Contains(grantRow(t, body, grantID), "revoke-grant") {
		t.Error("the supervisor is not offered to revoke")
	}

	revoke := views.Reverse(views.PathGrantRevoke, grantID)
	if res, _ := sue.post(revoke, url.Values{"reason": {"no token"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("revoke without the CSRF token: %d", res.StatusCode)
	}
	for _, b := range []*browser{otto, ann} {
		if res, _ := b.post(revoke, url.Values{"csrf": {b.csrf}}); res.StatusCode != http.StatusForbidden {
			t.Fatalf("revoke by a role that may not: %d", res.StatusCode)
		}
	}
	res, _ = sue.post(revoke, url.Values{"csrf": {sue.csrf}, "reason": {"chargeback <opened>"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", res.StatusCode)
	}
	_, body = sue.get(res.Header.Get("Location"))
	row = grantRow(t, body, grantID)
	if !strings.Contains(body, `data-testid="grant-flash"`) || !strings.Contains(row, `data-state="revoked"`) ||
		!strings.Contains(row, "chargeback &lt;opened&gt;") || strings.Contains(row, "revoke-grant") {
		t.Fatalf("after revoking:\n%s", row)
	}
	if third := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":100,"reason":"again"}`); third.Status != models.CallPending {
		t.Fatalf("a refund after the grant was revoked: %+v", third)
	}
	res, body = sue.post(revoke, url.Values{"csrf": {sue.csrf}})
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, "already revoked") {
		t.Fatalf("revoking twice: %d", res.StatusCode)
	}
}

// grantRow is the grant's row of the /policy page.
func grantRow(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<tr id="`+id+`"`)
	if i < 0 {
		t.Fatalf("grant %s is not listed on /policy", id)
	}
	row := page[i:]
	return row[:strings.Index(row, "</tr>")]
}

// Programs give, list and revoke grants on the staff API, with the same
// rules as the back office, and every answer is as the OpenAPI document says.
func TestStandingGrantsOnTheStaffAPI(t *testing.T) {
	a := newApp(t)
	ctx := context.Background()
	a.staff(models.Supervisor, "sue@x.test", "Sue")
	a.staff(models.Approver, "ann@x.test", "Ann")
	sueTok, _ := a.accounts.CreateAPIToken(ctx, "sue@x.test", models.Actor{})
	annTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	out := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":100,"reason":"scratched"}`)
	approve := "/api/v1/actions/" + out.CallID + "/approve"

	if r := a.do("POST", approve, annTok, `{"grant":{"uses":3,"for":"24h"}}`); r.Status != 403 {
		t.Fatalf("an approver's grant: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", approve, sueTok, `{"grant":{"uses":3,"for":"soon"}}`); r.Status != 400 || !strings.Contains(r.Raw, "grant.for") {
		t.Fatalf("a bad period: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", approve, sueTok, `{"grant":{"for":"24h"}}`); r.Status != 400 || !strings.Contains(r.Raw, "bound the grant") {
		t.Fatalf("an unbounded grant: %d %s", r.Status, r.Raw)
	}
	r := a.do("POST", approve, sueTok, `{"note":"known customer","grant":{"uses":3,"amount":500,"for":"168h"}}`)
	g, _ := r.Body["grant"].(map[string]any)
	if r.Status != 200 || r.Body["final"] != true || g["state"] != "active" || g["max_uses"] != 3.0 || g["note"] != "known customer" {
		t.Fatalf("approve with a grant: %d %s", r.Status, r.Raw)
	}
	id := g["id"].(string)
	if next := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":120,"reason":"dented"}`); next.Decision.Rule != gate.GrantRule+id {
		t.Fatalf("the next refund: %+v", next)
	}
	r = a.do("GET", "/api/v1/grants", annTok, "")
	list, _ := r.Body["grants"].([]any)
	if r.Status != 200 || len(list) != 1 || list[0].(map[string]any)["uses"] != 1.0 || list[0].(map[string]any)["used_amount"] != 120.0 {
		t.Fatalf("list: %d %s", r.Status, r.Raw)
	}
	revoke := "/api/v1/grants/" + id + "/revoke"
	if r := a.do("POST", revoke, annTok, `{"reason":"x"}`); r.Status != 403 {
		t.Fatalf("an approver revoking: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", revoke, sueTok, `{"reason":"done"}`); r.Status != 200 || r.Body["grant"].(map[string]any)["state"] != "revoked" {
		t.Fatalf("revoke: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", revoke, sueTok, ""); r.Status != 409 {
		t.Fatalf("revoke twice: %d %s", r.Status, r.Raw)
	}
	if r := a.do("POST", "/api/v1/grants/grant_nope/revoke", sueTok, ""); r.Status != 404 {
		t.Fatalf("revoke what is not there: %d %s", r.Status, r.Raw)
	}
}
