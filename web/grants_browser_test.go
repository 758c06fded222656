package web_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// A supervisor, in Chromium, approves a refund and gives a standing grant
// from the action page; Alice's next refund runs on its own; the grant is
// on /policy with its use, and revoking it there (after the confirmation)
// makes the one after wait again.
func TestBrowserSupervisorGivesAndRevokesAGrant(t *testing.T) {
	a := newApp(t)
	a.staff(models.Supervisor, "sue@x.test", "Sue Supervisor")
	sue := person(t, newBrowser(t))
	signInBrowser(t, sue, a.srv.URL, "sue@x.test")
	first := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":100,"reason":"broken"}`)

	err := chromedp.Do(sue,
		chromedp.Navigate(a.srv.URL+"/actions/"+first.CallID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=grant-on]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=grant-on]`)), // the README's words: one tick shows the bounds
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=grant-uses]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=grant-uses]`), "2"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=grant-amount]`), "300"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=grant-for]`), "8h"),
	)
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, sue, "action-grant-offer")
	err = chromedp.Do(sue, chromedp.Click(chromedp.CSS(`[data-testid=approve]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=flash]`)))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, sue, `[data-testid=flash]`, "Standing grant given", "up to 2 calls, up to $300.00 in all")
	grants, err := a.store.Grants(context.Background(), time.Hour, 10)
	if err != nil || len(grants) != 1 || !grants[0].ExpiresAt.Equal(grants[0].CreatedAt.Add(8*time.Hour)) {
		t.Fatalf("grants: %+v %v", grants, err)
	}
	id := grants[0].ID

	if next := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":120,"reason":"also broken"}`); next.Decision.Rule != gate.GrantRule+id ||
		next.Status != models.CallSucceeded {
		t.Fatalf("the next refund: %+v", next)
	}

	row := chromedp.CSS(`tr[data-grant="` + id + `"]`)
	err = chromedp.Do(sue, chromedp.Navigate(a.srv.URL+"/policy"), chromedp.WaitVisible(row))
	if err != nil {
		t.Fatal(err)
	}
	pageSays(t, sue, `tr[data-grant="`+id+`"]`, "1 of 2 calls used, $120.00 of $300.00 used", "left")
	screenshot(t, sue, "policy-grants")
	if _, err := chromedp.Run(sue, chromedp.Evaluate[bool](`window.confirm = function () { return true; }; true`)); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(sue,
		chromedp.SendKeys(chromedp.CSS(`tr[data-grant="`+id+`"] input[name=reason]`), "customer asked us to stop"),
		chromedp.Click(chromedp.CSS(`tr[data-grant="`+id+`"] [data-testid=revoke-grant]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=grant-flash]`)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if state, _ := chromedp.Run(sue, chromedp.AttributeValue(row, "data-state")); state.Value != "revoked" {
		t.Fatalf("after revoking, the row says %q", state.Value)
	}
	if third := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":100,"reason":"third"}`); third.Status != models.CallPending {
		t.Fatalf("after revoking: %+v", third)
	}
}
