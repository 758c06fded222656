package gate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
)

// $1,000 then $500 on one order must need what $1,500 at once needs: two
// approvers, one a supervisor. So must a second refund while the first is
// still waiting.
func TestSplitRefundNeedsTheSameApprovalsAsTheWhole(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	whole := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1500}`)
	if whole.Decision.Rule != "refund-over-1000-two-person" || whole.Decision.Approvals != 2 || whole.Decision.Role != models.Supervisor {
		t.Fatalf("$1,500 at once: %+v", whole.Decision)
	}
	if err := e.Gate.Reject(ctx, whole.CallID, supervisor, "testing the split"); err != nil {
		t.Fatal(err)
	}

	run := e.NewRun("cus_bob", "Bob")
	first := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1000}`)
	if first.Status != models.CallPending || first.Decision.Approvals != 1 {
		t.Fatalf("$1,000: %+v", first)
	}
	// While the $1,000 waits, $500 more on the order is judged with it.
	second := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":500}`)
	if second.Decision.Rule != "refund-over-1000-two-person" || second.Decision.Approvals != 2 || second.Decision.Role != models.Supervisor {
		t.Fatalf("$500 while $1,000 waits: %+v", second.Decision)
	}
	if !strings.Contains(second.Decision.Reason, "$1,500.00") {
		t.Fatalf("reason %q", second.Decision.Reason)
	}
	// And once the $1,000 has run, the same.
	if _, err := e.Gate.Approve(ctx, first.CallID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Gate.Reject(ctx, second.CallID, supervisor, "again"); err != nil {
		t.Fatal(err)
	}
	third := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":500}`)
	if third.Decision.Rule != "refund-over-1000-two-person" || third.Decision.Approvals != 2 {
		t.Fatalf("$500 after $1,000 refunded: %+v", third.Decision)
	}
	res, err := e.Gate.Approve(ctx, third.CallID, approver1, gate.ApproveRequest{})
	if err != nil || res.Final {
		t.Fatalf("one approver finished a split two-person refund: %+v %v", res, err)
	}
	if got := e.Order("B2001").RefundedCents; got != 100000 {
		t.Fatalf("B2001 refunded %d cents, want only the first $1,000", got)
	}
}

// Nineteen $50 refunds asked for at the same moment must stop where
// nineteen in a row do: $500 a day goes through without a person.
func TestConcurrentSmallRefundsStopAtTheDailyLimit(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	outs := make([]gate.Outcome, 19)
	for i := range outs {
		run := e.NewRun("cus_bob", "Bob")
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.Gate.Call(context.Background(), gate.CallRequest{RunID: run, CustomerID: "cus_bob", Channel: "test",
				Tool: "issue_refund", Args: []byte(`{"order_id":"B2001","amount":50}`)})
			if err != nil {
				t.Error(err)
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	allowed := 0
	for _, o := range outs {
		if o.Decision.Verdict == policy.Allow {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 19 concurrent $50 refunds went through with no person, want 10 ($500)", allowed)
	}
	if got := e.Order("B2001").RefundedCents; got != 50000 {
		t.Errorf("B2001 refunded %d cents without a person, want 50000", got)
	}
}

// One run, or one customer, cannot put more than a few actions in front of
// people; the model is told to wait.
func TestPendingActionsPerRunAndPerCustomerAreLimited(t *testing.T) {
	e := newEnv(t)
	e.Gate.Limits = gate.Limits{MaxPendingPerRun: 3, MaxPendingPerCustomer: 4}
	run := e.NewRun("cus_bob", "Bob")
	for i := 0; i < 3; i++ {
		if out := e.Call(run, "cus_bob", "cancel_order", `{"order_id":"B2001"}`); out.Status != models.CallInvalid && out.Status != models.CallPending {
			t.Fatalf("call %d: %+v", i, out)
		}
	}
	// B2001 is delivered, so cancelling it is refused before a person sees it.
	for i := 0; i < 3; i++ {
		if out := e.Call(run, "cus_bob", "issue_refund", fmt.Sprintf(`{"order_id":"B2001","amount":%d}`, 60+i)); out.Status != models.CallPending {
			t.Fatalf("refund %d: %+v", i, out)
		}
	}
	out := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":70}`)
	if out.Status != models.CallDenied || out.Decision.Rule != "limit:pending_per_run" || !strings.Contains(out.Error, "3 requests waiting") {
		t.Fatalf("a fourth waiting action in one run: %+v", out)
	}
	other := e.NewRun("cus_bob", "Bob")
	if out := e.Call(other, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":71}`); out.Status != models.CallPending {
		t.Fatalf("the customer's fourth: %+v", out)
	}
	out = e.Call(other, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":72}`)
	if out.Status != models.CallDenied || out.Decision.Rule != "limit:pending_per_customer" {
		t.Fatalf("the customer's fifth: %+v", out)
	}
	pending, err := e.Store.PendingActions(context.Background(), models.ActionFilter{Limit: 100})
	if err != nil || len(pending) != 4 {
		t.Fatalf("%d actions wait, want 4 (%v)", len(pending), err)
	}
}

// What cannot succeed never reaches a person: an anonymous run, another
// customer's order, more than is left.
func TestCallsThatCannotSucceedAreNeverQueued(t *testing.T) {
	e := newEnv(t)
	anon := e.NewRun("", "")
	for _, c := range []struct{ run, customer, args, want string }{
		{anon, "", `{"order_id":"A1001","amount":100}`, "signed-in customer"},
		{e.NewRun("cus_alice", "Alice"), "cus_alice", `{"order_id":"B2001","amount":100}`, "not found for this customer"},
		{e.NewRun("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1001","amount":500}`, "only $120.00 of order A1001 is left"},
	} {
		out := e.Call(c.run, c.customer, "issue_refund", c.args)
		if out.Status != models.CallInvalid || !strings.Contains(out.Error, c.want) {
			t.Errorf("%s: %+v", c.args, out)
		}
	}
	if pending, _ := e.Store.PendingActions(context.Background(), models.ActionFilter{Limit: 10}); len(pending) != 0 {
		t.Fatalf("%d impossible calls reached the queue", len(pending))
	}
}

// An approval given by someone whose account is disabled before the action
// completes no longer counts toward it.
func TestApprovalsOfDisabledAccountsNoLongerCount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	accounts := accounts.New(e.Store)
	add := func(email string, role models.StaffRole) models.Actor {
		st, err := accounts.AddStaff(ctx, email, email, role, "correct horse battery staple", models.SystemActor)
		if err != nil {
			t.Fatal(err)
		}
		return st.Actor()
	}
	ann, ben, sue := add("ann@x.test", models.Approver), add("ben@x.test", models.Approver), add("sue@x.test", models.Supervisor)
	admin := add("ada@x.test", models.Admin)
	out := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1200}`)
	if res, err := e.Gate.Approve(ctx, out.CallID, ann, gate.ApproveRequest{}); err != nil || res.Approvals != 1 {
		t.Fatalf("Ann: %+v %v", res, err)
	}
	if err := accounts.SetDisabled(ctx, ann.ID, true, admin); err != nil {
		t.Fatal(err)
	}
	res, err := e.Gate.Approve(ctx, out.CallID, sue, gate.ApproveRequest{})
	if err != nil || res.Final || res.Approvals != 1 {
		t.Fatalf("Sue after Ann was disabled: %+v %v (Ann's approval still counted)", res, err)
	}
	if res, err = e.Gate.Approve(ctx, out.CallID, ben, gate.ApproveRequest{}); err != nil || !res.Final {
		t.Fatalf("Ben: %+v %v", res, err)
	}
}

// An edited action is not counted against itself: editing $900 to $950 on
// a $950 order is one refund of $950, not $1,850.
func TestAnEditIsNotCountedAgainstItself(t *testing.T) {
	e := newEnv(t)
	out := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	res, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"A1002","amount":950}`)})
	if err != nil || !res.Final || res.Required != 1 {
		t.Fatalf("edit to $950 and approve: %+v %v", res, err)
	}
	if got := e.Order("A1002").RefundedCents; got != 95000 {
		t.Fatalf("A1002 refunded %d cents", got)
	}
}
