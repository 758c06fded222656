package gate_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

type env struct{ *agenttest.Env }

func newEnv(t testing.TB) *env { return &env{agenttest.New(t, demo.Shop)} }

// Order reads a demo order (A… is Alice's, B… Bob's).
func (e *env) Order(id string) *shop.Order {
	e.T.Helper()
	o, err := shop.On(e.Store).CustomerOrder(context.Background(), "cus_"+map[byte]string{'A': "alice", 'B': "bob"}[id[0]], id)
	if err != nil {
		e.T.Fatal(err)
	}
	return o
}

var (
	approver1  = agenttest.Approver1
	approver2  = agenttest.Approver2
	supervisor = agenttest.Supervisor
	auditor    = agenttest.Auditor
)

func TestAllowedReadRunsAndIsRecorded(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "get_order_status", `{"order_id":"A1002"}`)
	if out.Status != models.CallSucceeded || out.Decision.Verdict != policy.Allow {
		t.Fatalf("got %+v", out)
	}
	if !strings.Contains(string(out.Result), `"status":"delivered"`) {
		t.Fatalf("result does not show the order status: %s", out.Result)
	}
	rec := e.CallRecord(out.CallID)
	if rec.Rule != "default:read" || rec.PolicyVersion != e.Gate.Policy().Version() || rec.Args != `{"order_id":"A1002"}` || len(rec.ArgsHash) != 64 {
		t.Fatalf("record is missing the decision details: %+v", rec)
	}
}

func TestSmallRefundIsAllowedAndRecordedOnTheOrder(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1001","amount":20,"reason":"late"}`)
	if out.Status != models.CallSucceeded || out.Decision.Rule != "small-refund" {
		t.Fatalf("got %+v", out)
	}
	if o := e.Order("A1001"); o.RefundedCents != 2000 {
		t.Fatalf("order refunded %d cents, want 2000", o.RefundedCents)
	}
}

func TestBigRefundWaitsForApprovalAndRunsOnce(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900,"reason":"arrived broken"}`)
	if out.Status != models.CallPending || out.Decision.Reason != "Refund of $900.00" {
		t.Fatalf("got %+v", out)
	}
	if n := e.Executions["issue_refund"].Load(); n != 0 {
		t.Fatalf("a pending refund ran %d times", n)
	}
	if e.Order("A1002").RefundedCents != 0 {
		t.Fatal("money moved before approval")
	}
	res, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{Note: "photo checks out"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Final || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("approval did not run the refund: %+v", res)
	}
	if e.Order("A1002").RefundedCents != 90000 {
		t.Fatal("refund not recorded on the order")
	}
	_, err = e.Gate.Approve(context.Background(), out.CallID, supervisor, gate.ApproveRequest{})
	if fault.CodeOf(err) != fault.Conflict || !strings.Contains(fault.Message(err), "already decided") {
		t.Fatalf("second approval: %v", err)
	}
	if n := e.Executions["issue_refund"].Load(); n != 1 {
		t.Fatalf("refund ran %d times", n)
	}
}

func TestRejectRequiresReasonAndNeverRuns(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	if err := e.Gate.Reject(context.Background(), out.CallID, approver1, "  "); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("reject without reason: %v", err)
	}
	if err := e.Gate.Reject(context.Background(), out.CallID, approver1, "outside the return window"); err != nil {
		t.Fatal(err)
	}
	rec := e.CallRecord(out.CallID)
	if rec.Status != models.CallRejected || !strings.Contains(rec.Error, "outside the return window") {
		t.Fatalf("got %+v", rec)
	}
	if _, err := e.Gate.Approve(context.Background(), out.CallID, approver2, gate.ApproveRequest{}); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("approve after reject: %v", err)
	}
	if e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("a rejected refund ran")
	}
}

func TestEditThenApproveKeepsOriginalAndRefundsEditedAmount(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)

	_, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"A1002","amount":-5}`)})
	if fault.CodeOf(err) != fault.Invalid || !strings.Contains(fault.Message(err), "amount: must be > 0") {
		t.Fatalf("invalid edit: %v", err)
	}
	res, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"amount":450,"order_id":"A1002"}`)})
	if err != nil || !res.Final {
		t.Fatalf("edit and approve: %+v %v", res, err)
	}
	rec := e.CallRecord(out.CallID)
	if rec.OriginalArgs != `{"amount":900,"order_id":"A1002"}` || rec.Args != `{"amount":450,"order_id":"A1002"}` {
		t.Fatalf("original %s, edited %s", rec.OriginalArgs, rec.Args)
	}
	if e.Order("A1002").RefundedCents != 45000 {
		t.Fatal("the edited amount was not what was refunded")
	}
}

func TestEditThatRaisesTheAmountNeedsTheStricterRule(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_bob", "Bob")
	out := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":900}`)
	res, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"B2001","amount":1400}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Final || res.Required != 2 {
		t.Fatalf("raising a refund over $1,000 should need two approvers: %+v", res)
	}
	if rec := e.CallRecord(out.CallID); rec.RequiredRole != "supervisor" {
		t.Fatalf("required role %q", rec.RequiredRole)
	}
}

func TestTwoPersonRuleWithSupervisor(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_bob", "Bob")
	out := e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1200}`)
	if out.Status != models.CallPending || out.Decision.Approvals != 2 || out.Decision.Role != models.Supervisor {
		t.Fatalf("got %+v", out)
	}
	ctx := context.Background()
	if _, err := e.Gate.Approve(ctx, out.CallID, auditor, gate.ApproveRequest{}); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("auditor approval: %v", err)
	}
	res, err := e.Gate.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{})
	if err != nil || res.Final || res.Approvals != 1 {
		t.Fatalf("first approval: %+v %v", res, err)
	}
	if _, err := e.Gate.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{}); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("same person twice: %v", err)
	}
	_, err = e.Gate.Approve(ctx, out.CallID, approver2, gate.ApproveRequest{})
	if fault.CodeOf(err) != fault.Forbidden || !strings.Contains(fault.Message(err), "supervisor") {
		t.Fatalf("two approvers without a supervisor: %v", err)
	}
	if err := e.Gate.Reject(ctx, out.CallID, approver2, "no"); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("approver rejecting a supervisor action: %v", err)
	}
	res, err = e.Gate.Approve(ctx, out.CallID, supervisor, gate.ApproveRequest{})
	if err != nil || !res.Final || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("supervisor approval: %+v %v", res, err)
	}
	if e.Order("B2001").RefundedCents != 120000 {
		t.Fatal("refund not made")
	}
}

func TestSupervisorOnlyActionRefusesApprover(t *testing.T) {
	e := newEnv(t)
	reg := e.Gate.Tools()
	pol, err := policy.LoadPolicy([]byte(`
rules:
  - name: cancel-needs-supervisor
    tool: cancel_order
    decision: needs_approval
    role: supervisor
`), "inline", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: e.Store, Tools: reg, Policy: pol})
	t.Cleanup(g.Close)
	run := e.NewRun("cus_alice", "Alice")
	out, err := g.Call(context.Background(), gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "cancel_order", Args: []byte(`{"order_id":"A1003"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{}); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("approver on a supervisor action: %v", err)
	}
	if res, err := g.Approve(context.Background(), out.CallID, supervisor, gate.ApproveRequest{}); err != nil || !res.Final {
		t.Fatalf("supervisor: %+v %v", res, err)
	}
	if o := e.Order("A1003"); o.Status != shop.OrderCancelled || o.RefundedCents != 6000 {
		t.Fatalf("order after cancel: %+v", o)
	}
}

func TestExpiredActionCannotBeApproved(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	e.Notes.Changed()

	e.Clock.Advance(23 * time.Hour)
	if n, err := e.Gate.ExpireOverdueActions(context.Background()); err != nil || n != 0 {
		t.Fatalf("expired %d early: %v", n, err)
	}
	e.Clock.Advance(2 * time.Hour)
	_, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{})
	if fault.CodeOf(err) != fault.Conflict || !strings.Contains(fault.Message(err), "expired") {
		t.Fatalf("approve after expiry: %v", err)
	}
	if rec := e.CallRecord(out.CallID); rec.Status != models.CallExpired {
		t.Fatalf("status %s", rec.Status)
	}
	if got := e.Notes.Changed(); len(got) == 0 || slices.ContainsFunc(got, func(id string) bool { return id != out.CallID }) {
		t.Fatalf("watchers were told %v", got)
	}
	if e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("an expired refund ran")
	}
}

func TestSweeperExpiresOverdueActions(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	a := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	b := e.Call(run, "cus_alice", "cancel_order", `{"order_id":"A1003"}`)
	e.Clock.Advance(25 * time.Hour)
	n, err := e.Gate.ExpireOverdueActions(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("expired %d: %v", n, err)
	}
	for _, id := range []string{a.CallID, b.CallID} {
		if s := e.CallRecord(id).Status; s != models.CallExpired {
			t.Fatalf("%s is %s", id, s)
		}
	}
}

func TestInvalidAndUnknownCallsAreRecordedWithReadableErrors(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	cases := []struct{ tool, args, want string }{
		{"issue_refund", `{"order_id":"A1002"}`, "amount: required"},
		{"issue_refund", `{"order_id":"A1002","amount":"lots"}`, "amount: must be a number, got string"},
		{"issue_refund", `{"order_id":"A1002","amount":10,"to_account":"x"}`, "to_account: unknown field"},
		{"issue_refund", `{"order_id":`, "not valid JSON"},
		{"issue_refund", `[1,2]`, "must be a JSON object, got an array"},
		{"drop_tables", `{}`, `there is no tool named "drop_tables"`},
	}
	for _, c := range cases {
		out := e.Call(run, "cus_alice", c.tool, c.args)
		if out.Status != models.CallInvalid || !strings.Contains(out.Error, c.want) {
			t.Errorf("%s %s: got %s %q, want %q", c.tool, c.args, out.Status, out.Error, c.want)
		}
		if rec := e.CallRecord(out.CallID); rec.RawArgs != c.args || rec.Status != models.CallInvalid {
			t.Errorf("record %+v", rec)
		}
	}
	if e.Executions["issue_refund"].Load() != 0 {
		t.Fatal("an invalid call ran")
	}
}

func TestToolsOnlyReachTheRunsCustomer(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"B2001","amount":20}`)
	if out.Status != models.CallInvalid || !strings.Contains(out.Error, "not found for this customer") {
		t.Fatalf("refund on another customer's order: %+v", out)
	}
	if e.Order("B2001").RefundedCents != 0 {
		t.Fatal("Bob's order was refunded from Alice's run")
	}
	anon := e.NewRun("", "")
	out = e.Call(anon, "", "get_order_status", `{"order_id":"A1001"}`)
	if out.Status != models.CallInvalid || !strings.Contains(out.Error, "signed-in customer") {
		t.Fatalf("anonymous lookup: %+v", out)
	}
}

func TestRefundNeverExceedsWhatIsLeft(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1003","amount":50}`)
	if out.Status != models.CallSucceeded {
		t.Fatalf("first refund: %+v", out)
	}
	// The tool's check refuses it before any decision: nobody is asked.
	out = e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1003","amount":20}`)
	if out.Status != models.CallInvalid || !strings.Contains(out.Error, "only $10.00 of order A1003 is left") {
		t.Fatalf("over-refund: %+v", out)
	}
	// Two actions that each fit when asked for, approved one after the
	// other: the second can no longer work, so its approval is refused with
	// the reason (nothing runs), and it stays for a person to reject or edit.
	e = newEnv(t)
	run = e.NewRun("cus_alice", "Alice")
	a := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	b := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":100}`)
	if a.Status != models.CallPending || b.Status != models.CallPending {
		t.Fatalf("two refunds on A1002: %s, %s", a.Status, b.Status)
	}
	if _, err := e.Gate.Approve(context.Background(), a.CallID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.Gate.Approve(context.Background(), b.CallID, approver1, gate.ApproveRequest{})
	if fault.CodeOf(err) != fault.Conflict || !strings.Contains(fault.Message(err), "only $50.00 of order A1002 is left") {
		t.Fatalf("second approval: %v", err)
	}
	if c := e.CallRecord(b.CallID); c.Status != models.CallPending {
		t.Fatalf("the second action is %s", c.Status)
	}
	// Edited to what is left, it goes through.
	res, err := e.Gate.Approve(context.Background(), b.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"A1002","amount":60}`)})
	if fault.CodeOf(err) != fault.Invalid || !strings.Contains(fault.Message(err), "the edited call cannot work") {
		t.Fatalf("an edit to more than is left: %+v %v", res, err)
	}
	res, err = e.Gate.Approve(context.Background(), b.CallID, approver1, gate.ApproveRequest{Args: []byte(`{"order_id":"A1002","amount":50}`)})
	if err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("an edit to what is left: %+v %v", res, err)
	}
	if got := e.Order("A1002").RefundedCents; got != 95000 {
		t.Fatalf("A1002 refunded %d cents", got)
	}
}

func TestCustomerRefundedOver500GoesToApproval(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":600}`)
	if _, err := e.Gate.Approve(context.Background(), out.CallID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	out = e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1001","amount":10}`)
	if out.Status != models.CallPending || out.Decision.Rule != "refund-customer-over-500-in-24h" {
		t.Fatalf("$10 after $600 today: %+v", out)
	}
	if !strings.Contains(out.Decision.Reason, "would come to $610.00") {
		t.Fatalf("reason %q", out.Decision.Reason)
	}
	e.Clock.Advance(25 * time.Hour)
	out = e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1001","amount":10}`)
	if out.Status != models.CallSucceeded {
		t.Fatalf("a day later: %+v", out)
	}
}

func TestConcurrentApprovalsRunOnce(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	const n = 50
	var wg sync.WaitGroup
	var ok, conflicts, other atomic.Int64
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			actor := models.Actor{ID: "stf_" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Name: "Staff", Role: models.Approver}
			<-start
			_, err := e.Gate.Approve(context.Background(), out.CallID, actor, gate.ApproveRequest{})
			switch {
			case err == nil:
				ok.Add(1)
			case fault.CodeOf(err) == fault.Conflict && strings.Contains(fault.Message(err), "already decided"):
				conflicts.Add(1)
			default:
				other.Add(1)
				t.Errorf("unexpected error: %v", err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 || conflicts.Load() != n-1 || other.Load() != 0 {
		t.Fatalf("%d approvals, %d conflicts, %d other", ok.Load(), conflicts.Load(), other.Load())
	}
	approvals, err := e.Store.Approvals(context.Background(), out.CallID)
	if err != nil || len(approvals) != 1 {
		t.Fatalf("%d approval records: %v", len(approvals), err)
	}
	if got := e.Executions["issue_refund"].Load(); got != 1 {
		t.Fatalf("the refund ran %d times", got)
	}
	if e.Order("A1002").RefundedCents != 90000 {
		t.Fatal("refund missing or doubled")
	}
	rep, err := e.Store.VerifyAuditChain(context.Background())
	if err != nil || !rep.OK {
		t.Fatalf("audit chain after the race: %+v %v", rep, err)
	}
}

func TestTurnWithOneAllowedAndOnePendingCall(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	read := e.Call(run, "cus_alice", "get_order_status", `{"order_id":"A1002"}`)
	refund := e.Call(run, "cus_alice", "issue_refund", `{"order_id":"A1002","amount":900}`)
	if read.Status != models.CallSucceeded || refund.Status != models.CallPending {
		t.Fatalf("read %s, refund %s", read.Status, refund.Status)
	}
}

func TestRecoverInterruptedCalls(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	ctx := context.Background()
	// Simulate a crash: two calls recorded as executing, never finished.
	mk := func(tool, args string) string {
		id := models.NewID("call")
		err := e.Store.Write(ctx, func(tx *storage.Tx) error {
			return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: run, CustomerID: "cus_alice", Tool: tool, Risk: "high_write",
				Args: args, Status: models.CallExecuting, Decision: "allow", IdempotencyKey: gate.IdempotencyKey(id)})
		})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	refund := mk("issue_refund", `{"amount":20,"order_id":"A1001"}`)
	unknownTool := mk("retired_tool", `{}`)
	rerun, unknown, err := e.Gate.RecoverInterrupted(ctx, 0)
	if err != nil || rerun != 1 || unknown != 1 {
		t.Fatalf("rerun %d unknown %d: %v", rerun, unknown, err)
	}
	if s := e.CallRecord(refund).Status; s != models.CallSucceeded {
		t.Fatalf("idempotent refund is %s", s)
	}
	if s := e.CallRecord(unknownTool).Status; s != models.CallUnknown {
		t.Fatalf("non-recoverable call is %s", s)
	}
	// Running the recovered refund again with the same key pays nothing twice.
	if _, _, err := e.Gate.RecoverInterrupted(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if e.Order("A1001").RefundedCents != 2000 {
		t.Fatalf("refunded %d", e.Order("A1001").RefundedCents)
	}
}

func TestCancelWithdrawsAPendingAction(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	out := e.Call(run, "cus_alice", "cancel_order", `{"order_id":"A1003"}`)
	if err := e.Gate.Cancel(context.Background(), out.CallID, supervisor, "the customer closed the chat"); err != nil {
		t.Fatal(err)
	}
	if rec := e.CallRecord(out.CallID); rec.Status != models.CallCancelled || !strings.Contains(rec.Error, "closed the chat") {
		t.Fatalf("%+v", rec)
	}
	if err := e.Gate.Cancel(context.Background(), out.CallID, supervisor, "again"); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := e.Gate.Approve(context.Background(), out.CallID, supervisor, gate.ApproveRequest{}); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("approve after cancel: %v", err)
	}
	if e.Order("A1003").Status != shop.OrderProcessing {
		t.Fatal("a cancelled action ran")
	}
}

func TestReconcileAnUnknownCall(t *testing.T) {
	e := newEnv(t)
	run := e.NewRun("cus_alice", "Alice")
	ctx := context.Background()
	id := models.NewID("call")
	if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: run, Tool: "retired_tool", Status: models.CallExecuting, Decision: "allow", IdempotencyKey: gate.IdempotencyKey(id)})
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Gate.RecoverInterrupted(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Gate.Reconcile(ctx, id, approver1, true, "checked"); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("approver reconciles: %v", err)
	}
	if err := e.Gate.Reconcile(ctx, id, supervisor, true, " "); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("no note: %v", err)
	}
	if err := e.Gate.Reconcile(ctx, id, supervisor, false, "the payment provider shows no charge"); err != nil {
		t.Fatal(err)
	}
	if c := e.CallRecord(id); c.Status != models.CallFailed || !strings.Contains(c.Error, "no charge") {
		t.Fatalf("%+v", c)
	}
	if err := e.Gate.Reconcile(ctx, id, supervisor, true, "again"); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("second reconcile: %v", err)
	}
}
