package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// inFirstScreen says which of the selectors are not wholly inside the
// viewport as the page opens (none, when all are).
func inFirstScreen(t *testing.T, ctx context.Context, sels ...string) []string {
	t.Helper()
	var out []string
	for _, sel := range sels {
		in, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector('`+sel+`'); if (!e) return false;
			const r = e.getBoundingClientRect(); return r.width > 0 && r.top >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; })()`))
		if err != nil || !in {
			y, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`(document.querySelector('`+sel+`') || {getBoundingClientRect: () => ({bottom: -1})}).getBoundingClientRect().bottom`))
			out = append(out, fmt.Sprintf("%s (bottom at %.0f px)", sel, y))
		}
	}
	return out
}

// At 1440×900 an approver sees what is asked, why it waits and every
// decision control without scrolling, on a refund with all its evidence (what
// to know, the customer's earlier calls, a standing grant offered to a
// supervisor) and on one that needs two people; the evidence comes after.
func TestBrowserTheDecisionIsInTheFirstScreen(t *testing.T) {
	a := newApp(t)
	a.staff(models.Supervisor, "sam@x.test", "Sam Supervisor")
	earlier := a.pendingRefund("the lid was cracked")
	if err := a.gate.Reject(context.Background(), earlier.ID, models.Actor{ID: "stf_x", Name: "X", Role: models.Supervisor}, "not ours"); err != nil {
		t.Fatal(err)
	}
	one := a.pendingRefund("it arrived broken")
	two := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200,"reason":"never arrived"}`)
	if two.Decision.Approvals != 2 {
		t.Fatalf("the $1,200 refund needs %d approvals, want 2", two.Decision.Approvals)
	}
	ctx := person(t, newBrowser(t))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	signInBrowser(t, ctx, a.srv.URL, "sam@x.test")
	controls := []string{"[data-testid=approve]", "[data-testid=edit-toggle]", "[data-testid=reject-reason]", "[data-testid=reject]",
		"[data-testid=decide-keys]", "[data-testid=reason]", "[data-testid=needs]", "[data-testid=args]", "[data-testid=key-facts]"}
	for _, c := range []struct{ id, shot string }{{one.ID, "action-first-screen-1440"}, {two.CallID, "action-two-people-1440"}} {
		if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/actions/"+c.id), chromedp.WaitVisible(chromedp.CSS("[data-testid=approve]"))); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, c.shot)
		if out := inFirstScreen(t, ctx, controls...); len(out) > 0 {
			t.Errorf("%s: not in the first screen at 1440×900: %s", c.id, strings.Join(out, ", "))
		}
		// The evidence comes after the decision, not before it.
		order, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
			const d = document.querySelector('[data-testid=decision]').getBoundingClientRect().top;
			const ev = [...document.querySelectorAll('[data-testid=context], [data-testid=recent-calls], [data-testid=transcript], [data-testid=record]')];
			return ev.length >= 3 && ev.every(e => e.getBoundingClientRect().top > d); })()`))
		if err != nil || !order {
			t.Errorf("%s: the evidence and the record are not all below the decision (%v)", c.id, err)
		}
	}
	// The money the decision turns on is beside it: "Left to refund" in the
	// first screen, and on a phone above the decision, not below it.
	if text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("[data-testid=key-facts]"))); !strings.Contains(text, "Left to refund") || !strings.Contains(text, "Refunded so far") {
		t.Errorf("the key facts: %q", text)
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(a.srv.URL+"/actions/"+one.ID), chromedp.WaitVisible(chromedp.CSS("[data-testid=approve]"))); err != nil {
		t.Fatal(err)
	}
	above, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=key-facts]').getBoundingClientRect().bottom <= document.querySelector('[data-testid=approve]').getBoundingClientRect().top`))
	if err != nil || !above {
		t.Errorf("on a phone the money facts are not above the decision (%v)", err)
	}
	screenshot(t, ctx, "action-phone-key-facts")
	// On a phone (390×844) too, what is asked, the money it turns on and
	// Approve are on the first screen, with what it needs and no keyboard
	// hint; why it waits follows the decision.
	if out := inFirstScreen(t, ctx, "[data-testid=action-summary]", "[data-testid=key-facts]", "[data-testid=needs-phone]", "[data-testid=approve]"); len(out) > 0 {
		t.Errorf("not in the first screen at 390×844: %s", strings.Join(out, ", "))
	}
	if shown, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=decide-keys]').getBoundingClientRect().height > 0`)); shown {
		t.Error("a phone is shown the keyboard's keys")
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	// The grant the supervisor may give sits with Approve, in the first screen too.
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/actions/"+one.ID), chromedp.WaitVisible(chromedp.CSS("[data-testid=grant-on]"))); err != nil {
		t.Fatal(err)
	}
	if out := inFirstScreen(t, ctx, "[data-testid=grant-on]"); len(out) > 0 {
		t.Errorf("the standing grant is not in the first screen: %s", strings.Join(out, ", "))
	}
}

// A second person's approval of a two-person action reaches an open page at
// once: the Request box's count and the banner say who, without a reload.
func TestBrowserAnotherApprovalShowsAtOnce(t *testing.T) {
	a := newApp(t)
	a.staff(models.Supervisor, "sam@x.test", "Sam Supervisor")
	two := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200,"reason":"never arrived"}`)
	ctx := person(t, newBrowser(t))
	signInBrowser(t, ctx, a.srv.URL, "sam@x.test")
	if err := chromedp.Do(ctx, chromedp.Navigate(a.srv.URL+"/actions/"+two.CallID), chromedp.WaitVisible(chromedp.CSS("[data-testid=progress]"))); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('`+sel+`') || {}).textContent || ""`))
		return strings.Join(strings.Fields(s), " ")
	}
	if got := text("[data-testid=progress]"); got != "0 of 2 so far" {
		t.Fatalf("progress before anyone approved: %q", got)
	}
	if _, err := a.gate.Approve(context.Background(), two.CallID, models.Actor{ID: "stf_ann", Name: "Ann Approver", Role: models.Approver}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the other approval on the open page", `document.querySelector('[data-testid=progress]').textContent.trim() === "1 of 2 — waiting for a supervisor" &&
		(document.querySelector('[data-testid=action-news]') || {textContent: ""}).textContent.includes("Approved by Ann Approver")`)
	// Still waiting, so the controls still work.
	if n, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('.decide.inactive').length`)); n != 0 {
		t.Fatal("one approval of two turned the controls off")
	}
	screenshot(t, ctx, "action-one-of-two")
}

// An outside agent's call shows the agent's context where a chat's call
// shows the conversation: who asked, how, what it said and its other calls
// in the session; the title reads as words; approving it tells of the agent,
// not of a customer's conversation; /runs names the session and counts its
// calls.
func TestBrowserAnOutsideAgentsCallShowsItsContext(t *testing.T) {
	a, _ := gateAPIApp(t)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "support-bot", models.Actor{ID: "test"})
	a.staff(models.Admin, "ada@x.test", "Ada Admin")
	a.do("POST", "/api/v1/calls", key, `{"tool":"lookup_order","args":{"order_id":"A7"},"session":"conv-7","customer_id":"cus_1"}`)
	r := a.do("POST", "/api/v1/calls", key, `{"tool":"refund_order","args":{"order_id":"A7","amount":90},"session":"conv-7","customer_id":"cus_1","context":"The parcel came open."}`)
	id := callOf(t, r)["id"].(string)

	b := person(t, newBrowser(t))
	if err := chromedp.Do(b, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	signInBrowser(t, b, a.srv.URL, "ada@x.test")
	if err := chromedp.Do(b, chromedp.Navigate(a.srv.URL+"/actions/"+id), chromedp.WaitVisible(chromedp.CSS("[data-testid=agent-facts]"))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, b, "action-outside-agent-1440")
	page, err := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The agent's context", "support-bot", "over the gate API", "conv-7", "The parcel came open.",
		"Refund order: amount 90, order_id A7", "Lookup order: order_id A7", "the agent is told this"} {
		if !strings.Contains(page, want) {
			t.Errorf("the outside agent's action page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "Conversation") || strings.Contains(page, "over MCP") {
		t.Errorf("the outside agent's action page shows a chat's conversation column or the transport as its words:\n%s", page)
	}
	if out := inFirstScreen(t, b, "[data-testid=approve]", "[data-testid=reject]"); len(out) > 0 {
		t.Errorf("not in the first screen: %s", strings.Join(out, ", "))
	}
	if err := chromedp.Do(b, chromedp.Click(chromedp.CSS("[data-testid=approve]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=flash]"))); err != nil {
		t.Fatal(err)
	}
	flash, _ := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('[data-testid=flash]').textContent`))
	if !strings.Contains(flash, "the agent has its result") || strings.Contains(flash, "conversation") {
		t.Errorf("after approving an outside agent's call: %q", flash)
	}

	if err := chromedp.Do(b, chromedp.Navigate(a.srv.URL+"/runs"), chromedp.WaitVisible(chromedp.CSS("[data-testid=runs]"))); err != nil {
		t.Fatal(err)
	}
	runs, _ := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('[data-testid=runs]').innerText`))
	if !strings.Contains(runs, "Session conv-7 of support-bot, over the gate API") || !strings.Contains(runs, "2 calls") || strings.Contains(runs, "no message yet") {
		t.Errorf("/runs for an outside agent's session:\n%s", runs)
	}
	if err := chromedp.Do(b, chromedp.Click(chromedp.CSS("[data-testid=run-link]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=session-calls]"))); err != nil {
		t.Fatal(err)
	}
	session, _ := chromedp.Run(b, chromedp.Evaluate[string](`document.querySelector('main').innerText`))
	if !strings.Contains(session, "Refund order: amount 90, order_id A7") || !strings.Contains(session, "Lookup order") {
		t.Errorf("the session's page does not list its calls:\n%s", session)
	}
	screenshot(t, b, "run-outside-agent-1440")
}
