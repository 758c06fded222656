package gate_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// Replaying the policy in force changes nothing; replaying a stricter one
// says which decisions would change, from what to what, with the calls.
func TestReplayAPolicyOverRecordedCalls(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	read := e.Call(run, "cus_alice", "get_order_status", `{"order_id":"A1002"}`)
	small := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1001","amount":20}`)
	big := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1200}`)
	if read.Decision.Verdict != policy.Allow || small.Decision.Verdict != policy.Allow || big.Decision.Verdict != policy.NeedsApproval {
		t.Fatalf("recorded: %v %v %v", read.Decision.Verdict, small.Decision.Verdict, big.Decision.Verdict)
	}
	ctx := context.Background()
	since := e.Clock.Now().Add(-time.Hour)
	same, err := policy.LoadPolicy(shop.PolicyYAML, "in force", e.Gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gate.ReplayPolicy(ctx, e.Store, e.Gate.Tools(), same, since)
	if err != nil || rep.Calls != 3 || rep.Unchanged != 3 || len(rep.Changes) != 0 {
		t.Fatalf("the policy in force, replayed: %+v %v", rep, err)
	}
	strict, err := policy.LoadPolicy([]byte(`rules:
  - name: no-refunds
    tool: issue_refund
    decision: deny
    reason: refunds are paused
`), "candidate", e.Gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	rep, err = gate.ReplayPolicy(ctx, e.Store, e.Gate.Tools(), strict, since)
	if err != nil || rep.Calls != 3 || rep.Unchanged != 1 || len(rep.Changes) != 2 {
		t.Fatalf("a stricter policy: %+v %v", rep, err)
	}
	want := map[string]gate.ReplayExample{"allow -> deny": {ID: small.CallID, Summary: "Refund $20.00 on order A1001"},
		"needs_approval (2, supervisor) -> deny": {ID: big.CallID, Summary: "Refund $1,200.00 on order B2001"}}
	for _, ch := range rep.Changes {
		ex, ok := want[ch.From+" -> "+ch.To]
		if !ok || ch.Count != 1 || len(ch.Examples) != 1 || ch.Examples[0] != ex || ch.Tool != "issue_refund" || ch.ToRule != "no-refunds" || ch.FromRule == "" {
			t.Fatalf("change %+v, want one of %v", ch, want)
		}
	}
	// Only calls since the time asked for.
	if rep, _ := gate.ReplayPolicy(ctx, e.Store, e.Gate.Tools(), strict, e.Clock.Now().Add(time.Hour)); rep.Calls != 0 {
		t.Fatalf("calls from before --since were replayed: %+v", rep)
	}
}

// After a reload, the actions waiting for a person are decided again: the
// new policy's denial cancels one, its stricter rule makes one wait for
// more, and a rule that would allow approves nothing.
func TestReloadDecidesWaitingActionsAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	refund := func(customer, order string, amount int) string {
		out := e.Call(e.NewRun(customer, customer), customer, "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":%d}`, order, amount))
		if out.Status != models.CallPending {
			t.Fatalf("refund %s: %s", order, out.Status)
		}
		return out.CallID
	}
	stricter := refund("cus_alice", "A1002", 900)
	denied := refund("cus_bob", "B2001", 300)
	next, err := policy.LoadPolicy([]byte(`rules:
  - name: bob-paused
    tool: issue_refund
    when: args.order_id == "B2001"
    decision: deny
    reason: refunds on B2001 are paused
  - name: big-two-people
    tool: issue_refund
    when: args.amount > 500
    decision: needs_approval
    reason: two people now
    approvals: 2
    role: supervisor
  - name: the-rest
    tool: issue_refund
    decision: allow
    reason: fine
`), "next", e.Gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	e.Gate.Reload(e.Gate.Tools(), next)
	re, err := e.Gate.RedecidePending(ctx)
	if err != nil || re.Cancelled != 1 || re.Stricter != 1 {
		t.Fatalf("redecided %+v %v", re, err)
	}
	if c := e.CallRecord(denied); c.Status != models.CallCancelled || !strings.Contains(c.Error, "refunds on B2001 are paused") {
		t.Fatalf("the denied one: %s %q", c.Status, c.Error)
	}
	if c := e.CallRecord(stricter); c.Status != models.CallPending || c.RequiredApprovals != 2 || c.RequiredRole != models.Supervisor {
		t.Fatalf("the stricter one: %s %d %s", c.Status, c.RequiredApprovals, c.RequiredRole)
	}
	// A policy that would allow it approves nothing.
	lenient, _ := policy.LoadPolicy([]byte("rules:\n  - name: all\n    tool: issue_refund\n    decision: allow\n    reason: fine\n"), "lenient", e.Gate.Tools())
	e.Gate.Reload(e.Gate.Tools(), lenient)
	if re, err := e.Gate.RedecidePending(ctx); err != nil || re.Cancelled+re.Stricter != 0 {
		t.Fatalf("a lenient policy changed %+v %v", re, err)
	}
	if c := e.CallRecord(stricter); c.Status != models.CallPending || c.RequiredApprovals != 2 {
		t.Fatalf("a reload eased or approved an action: %s %d", c.Status, c.RequiredApprovals)
	}
}

// A call an approver edited is replayed like with like: the arguments it
// was first decided on against that first decision, not against the
// requirements the edit raised. The policy in force changes nothing.
func TestReplayComparesAnEditedCallWithItsFirstDecision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	out := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":900}`)
	if out.Decision.Verdict != policy.NeedsApproval {
		t.Fatalf("recorded: %+v", out.Decision)
	}
	res, err := e.Gate.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"B2001","amount":1100}`)})
	if err != nil || res.Final || res.Required != 2 {
		t.Fatalf("the edit should raise what the action needs: %+v %v", res, err)
	}
	same, err := policy.LoadPolicy(shop.PolicyYAML, "in force", e.Gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gate.ReplayPolicy(ctx, e.Store, e.Gate.Tools(), same, e.Clock.Now().Add(-time.Hour))
	if err != nil || rep.Calls != 1 || rep.Unchanged != 1 || len(rep.Changes) != 0 {
		t.Fatalf("the policy in force over an edited call: %+v %v", rep, err)
	}
}

// A version that changes only a reason re-decides a waiting action to the
// same requirements: nothing is raised, and no event says it was (three
// such versions each recorded action.requirements_raised for a waiting
// $900 refund whose requirements had not changed).
func TestRedecidingToTheSameRequirementsRecordsNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	out := e.Call(e.NewRun("cus_alice", "cus_alice"), "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	if out.Status != models.CallPending {
		t.Fatalf("refund: %s", out.Status)
	}
	before := e.CallRecord(out.CallID)
	for i := range 3 {
		same, err := policy.LoadPolicy([]byte(fmt.Sprintf(`rules:
  - name: held
    tool: issue_refund
    decision: needs_approval
    reason: "reworded %d"
`, i)), "same", e.Gate.Tools())
		if err != nil {
			t.Fatal(err)
		}
		e.Gate.Reload(e.Gate.Tools(), same)
		if re, err := e.Gate.RedecidePending(ctx); err != nil || re.Stricter != 0 {
			t.Fatalf("version %d: redecided %+v %v", i, re, err)
		}
	}
	events, err := e.Store.AuditEventsFor(ctx, out.CallID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Kind == models.EventActionRequirementsRaised {
			t.Fatalf("requirements_raised recorded with nothing raised: %+v", ev)
		}
	}
	if c := e.CallRecord(out.CallID); c.RequiredApprovals != before.RequiredApprovals || c.RequiredRole != before.RequiredRole {
		t.Fatalf("requirements changed: %d %q, were %d %q", c.RequiredApprovals, c.RequiredRole, before.RequiredApprovals, before.RequiredRole)
	}
}
