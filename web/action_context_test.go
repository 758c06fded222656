package web_test

import (
	"bufio"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// The approver reads what is asked in words, what to know about the order,
// where the approvals stand, and can go on to the next action.
func TestActionPageGivesTheApproverWhatTheyNeed(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	first := a.pendingRefund("it arrived broken")
	two := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200}`)
	b := a.signIn("ann@x.test")

	_, page := b.get("/actions/" + first.ID)
	for _, want := range []string{
		`<h1 data-testid="action-summary">Refund $900.00 on order A1002</h1>`,
		`<dt>Order</dt><dd>A1002: Espresso machine</dd>`, `<dt>Left to refund</dt><dd>$950.00</dd>`,
		`0 of 1 so far`,
		`>Amount <span class="with-unit"><span aria-hidden="true">$</span><input type="number" name="arg.amount" value="900" step="0.01" min="0.01" max="5000"`,
		`>Order ID <input type="text" name="arg.order_id"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the action page lacks %s", want)
		}
	}
	res, _ := b.post("/actions/"+two.CallID+"/approve", url.Values{"csrf": {b.csrf}})
	_, page = b.get(res.Header.Get("Location"))
	if !strings.Contains(page, "1 of 2 — waiting for a supervisor") {
		t.Errorf("the two-person action does not say it waits for a supervisor")
	}
	if !strings.Contains(page, `href="/actions/`+first.ID+`" data-testid="next-in-queue"`) {
		t.Errorf("no link to the next action in the queue")
	}
	// Alice's second request shows her first one beside it.
	second := a.refund(first.RunID, "cus_alice", `{"order_id":"A1001","amount":100}`)
	_, page = b.get("/actions/" + second.CallID)
	recent := between(page, `data-testid="recent-calls"`, "</ul>")
	if !strings.Contains(recent, "Refund $900.00 on order A1002") || !strings.Contains(recent, "pending") {
		t.Errorf("the customer's recent requests: %q", recent)
	}
	_, queue := b.get("/queue")
	if !strings.Contains(queue, `data-testid="queue-subject">Refund $1,200.00 on order B2001</a>`) || !strings.Contains(queue, `<span title="cus_bob">Bob</span>`) {
		t.Errorf("the queue row does not say what is asked, or who asks")
	}
}

// A call refused before any decision (arguments the tool does not take)
// reads as what it is, by its tool and why: in "This customer lately" and
// in the audit table, never as a phrase with blanks or a bare dash.
func TestInvalidCallsReadAsWhatTheyAre(t *testing.T) {
	a := newApp(t)
	a.staff(models.Admin, "ada@x.test", "Ada")
	run := a.run("cus_bob", "Bob")
	bad := a.refund(run, "cus_bob", `{"order_id":"B2001","amount":"lots"}`)
	if bad.Status != models.CallInvalid {
		t.Fatalf("the bad call was %s", bad.Status)
	}
	waiting := a.refund(run, "cus_bob", `{"order_id":"B2001","amount":1200}`)
	b := a.signIn("ada@x.test")
	_, page := b.get("/actions/" + waiting.CallID)
	recent := between(page, `data-testid="recent-calls"`, "</ul>")
	if !strings.Contains(recent, "issue_refund (invalid call: ") || strings.Contains(recent, "?") {
		t.Errorf("the invalid call in this customer's recent calls: %q", recent)
	}
	_, audit := b.get("/audit?customer=cus_bob")
	row := between(audit, `<a href="/actions/`+bad.CallID+`">`, "</tr>")
	if !strings.Contains(row, "not decided") || strings.Contains(row, "—") || strings.Contains(row, `<small class="muted">: </small>`) {
		t.Errorf("the invalid call's audit row: %q", row)
	}
	if !strings.Contains(row, "amount") {
		t.Errorf("the audit row does not say why the call was refused: %q", row)
	}
}

// The rule that holds an action says what it is for, wherever the
// decision is shown: beside the reason in the queue, linked to its row on
// /policy from the action page, and /policy shows the rules as people read
// them with the file itself a click away.
func TestTheRuleSaysWhatItIsFor(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	out := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":200}`)
	b := a.signIn("ann@x.test")
	const words = "Any refund the rules above do not decide waits for one person, for up to a day."
	if _, queue := b.get("/queue"); !strings.Contains(queue, `<small class="muted" data-testid="rule-description">`+words) {
		t.Errorf("the queue does not say what the rule is for")
	}
	_, page := b.get("/actions/" + out.CallID)
	if !strings.Contains(page, `<a href="/policy#rule-refund-needs-approval" data-testid="rule"><code>refund-needs-approval</code></a>`) ||
		!strings.Contains(page, words) {
		t.Errorf("the action page does not link the rule and say what it is for:\n%s", between(page, "<dt>Rule</dt>", "</dd>"))
	}
	_, policy := b.get("/policy")
	row := between(policy, `<tr id="rule-refund-needs-approval">`, "</tr>")
	if !strings.Contains(row, words) || !strings.Contains(row, "needs_approval") {
		t.Errorf("the policy page's row of the rule: %q", row)
	}
	if !strings.Contains(policy, `data-testid="policy-yaml"`) || !strings.Contains(policy, "name: refund-needs-approval") {
		t.Errorf("the policy file is not a click away on /policy")
	}
	// Conditions read as words, with the CEL beside them; the totals they
	// read say what they sum.
	two := between(policy, `<tr id="rule-refund-over-1000-two-person">`, "</tr>")
	for _, want := range []string{"the amount plus the total refunded on order is more than 1,000", "<code>args.amount + totals.refunded_on_order &gt; 1000</code>",
		"2 approvals from different people, at least one from a supervisor"} {
		if !strings.Contains(two, want) {
			t.Errorf("the two-person rule's row lacks %q: %s", want, two)
		}
	}
	if small := between(policy, `<tr id="rule-small-refund">`, "</tr>"); !strings.Contains(small, "Refund of [the amount, in dollars] is within the $50 limit") {
		t.Errorf("the small-refund rule's reason is not in words: %s", small)
	}
	if totals := between(policy, `data-testid="policy-totals"`, "</dl>"); !strings.Contains(totals, "What this order was refunded") ||
		!strings.Contains(totals, "The amount of the customer&#39;s earlier issue_refund calls (succeeded, running or waiting) with the same order_id.") {
		t.Errorf("the totals: %s", totals)
	}
}

// An action page's stream starts with the action's status as it is now: a
// decision made between the page's render and the stream's opening still
// reaches the page.
func TestTheActionStreamStartsWithTheStatusNow(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	out := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":200}`)
	b := a.signIn("ann@x.test")
	b.get("/actions/" + out.CallID) // the page, rendered while the action waits
	if err := a.gate.Reject(context.Background(), out.CallID, models.Actor{ID: "stf_x", Name: "Ben", Role: models.Supervisor}, "not this one"); err != nil {
		t.Fatal(err)
	}
	res, err := b.client.Get(a.srv.URL + "/actions/" + out.CallID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first := make(chan string, 1)
	go func() {
		var data strings.Builder
		br := bufio.NewReader(res.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				first <- data.String()
				return
			}
			if line == "\n" {
				first <- data.String()
				return
			}
			data.WriteString(line)
		}
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, "event: status") || !strings.Contains(ev, "rejected") || !strings.Contains(ev, "Rejected by Ben") {
			t.Fatalf("the stream's first event: %q", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream said nothing of the decision already made")
	}
}

// A waiting action held by one policy version shows that version's words
// for its rule after another version is put in force, and says so.
func TestAHeldActionShowsTheWordsOfTheVersionThatHeldIt(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.signIn("ann@x.test")
	held := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":1200}`)
	const then = "Refunds on one order that come to more than $1,000, in one go or split, need two people, one of them a supervisor."
	_, page := b.get("/actions/" + held.CallID)
	if !strings.Contains(page, then) || strings.Contains(page, `data-testid="held-under"`) {
		t.Fatalf("under the version that held it: %s", between(page, `data-testid="rule"`, "</dd>"))
	}
	later, err := policy.LoadPolicy([]byte(strings.Replace(string(shop.PolicyYAML), then, "Big refunds need two people.", 1)), "later.yaml", a.gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	a.gate.Reload(a.gate.Tools(), later)
	_, page = b.get("/actions/" + held.CallID)
	rule := between(page, `data-testid="rule"`, "</dd>")
	if !strings.Contains(rule, then) || strings.Contains(rule, "Big refunds") || !strings.Contains(rule, "Held under policy version "+held.Decision.PolicyVersion[:12]) ||
		!strings.Contains(rule, "since replaced by "+later.Version()[:12]) {
		t.Fatalf("after a later version: %s", rule)
	}
}

// Approving and rejecting are alike: neither asks again in a dialog (the
// decision is the deliberate click; Reject needs a typed reason).
func TestDecisionsAskNoConfirmation(t *testing.T) {
	a := newApp(t)
	a.staff(models.Approver, "ann@x.test", "Ann")
	b := a.signIn("ann@x.test")
	held := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":300}`)
	_, page := b.get("/actions/" + held.CallID)
	decide := between(page, `class="decide"`, `</section>`)
	if !strings.Contains(decide, `data-testid="approve"`) || !strings.Contains(decide, `data-testid="reject"`) || strings.Contains(decide, "data-confirm") {
		t.Fatalf("the decision forms: %s", decide)
	}
}
