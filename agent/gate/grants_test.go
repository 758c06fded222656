package gate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
)

// grantOn makes a pending refund for the customer and has the supervisor
// approve it with a standing grant.
func (e *env) grantOn(customerID, name, order string, amount float64, grant gate.GrantRequest) *models.Grant {
	e.T.Helper()
	run := e.NewRun(customerID, name)
	out := e.Call(run, customerID, "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":%v,"reason":"broken"}`, order, amount))
	if out.Status != models.CallPending {
		e.T.Fatalf("the first refund should wait for a person: %+v", out)
	}
	res, err := e.Gate.Approve(context.Background(), out.CallID, supervisor, gate.ApproveRequest{Note: "regular customer", Grant: &grant})
	if err != nil {
		e.T.Fatal(err)
	}
	if !res.Final || res.Grant == nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		e.T.Fatalf("approval with a grant: %+v", res)
	}
	return res.Grant
}

// refund asks for a refund on the customer's run and says what happened.
func (e *env) refund(customerID, order string, amount float64) gate.Outcome {
	e.T.Helper()
	return e.Call(e.NewRun(customerID, "x"), customerID, "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":%v,"reason":"broken"}`, order, amount))
}

func (e *env) grantEvents(id string) []map[string]any {
	e.T.Helper()
	evs, err := e.Store.AuditEventsFor(context.Background(), id)
	if err != nil {
		e.T.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		var p map[string]any
		if err := json.Unmarshal([]byte(ev.Payload), &p); err != nil {
			e.T.Fatal(err)
		}
		p["kind"], p["actor"] = string(ev.Kind), ev.Actor
		out = append(out, p)
	}
	return out
}

// A supervisor's grant of two calls lets the next two refunds for the same
// customer run without a person, each use audited with the grant's id; the
// third waits again, and other customers and tools are never covered.
func TestGrantIsUsedThenExhausted(t *testing.T) {
	e := newEnv(t)
	g := e.grantOn("cus_alice", "Alice", "A1002", 100, gate.GrantRequest{Uses: 2, For: 24 * time.Hour})
	if g.Tool != "issue_refund" || g.CustomerID != "cus_alice" || g.CustomerName != "Alice" || g.MaxUses != 2 ||
		!g.ExpiresAt.Equal(e.Clock.Now().Add(24*time.Hour)) {
		t.Fatalf("grant: %+v", g)
	}

	for i := 1; i <= 2; i++ {
		out := e.refund("cus_alice", "A1002", 100)
		if out.Status != models.CallSucceeded || out.Decision.Rule != gate.GrantRule+g.ID {
			t.Fatalf("refund %d under the grant: %+v", i, out)
		}
		if !strings.Contains(out.Decision.Reason, fmt.Sprintf("%d of 2 calls used", i)) || !strings.Contains(out.Decision.Reason, "Sue") {
			t.Fatalf("the reason should say whose grant and what is left: %q", out.Decision.Reason)
		}
	}
	if n := e.Executions["issue_refund"].Load(); n != 3 {
		t.Fatalf("refunds ran %d times, want 3 (the approved one and two under the grant)", n)
	}
	if e.Order("A1002").RefundedCents != 30000 {
		t.Fatalf("refunded %d cents", e.Order("A1002").RefundedCents)
	}
	if out := e.refund("cus_alice", "A1002", 100); out.Status != models.CallPending {
		t.Fatalf("a third refund with the grant used up: %+v", out)
	}
	if out := e.refund("cus_bob", "B2001", 100); out.Status != models.CallPending {
		t.Fatalf("another customer's refund: %+v", out)
	}
	if out := e.Call(e.NewRun("cus_alice", "Alice"), "cus_alice", "cancel_order", `{"order_id":"A1003","reason":"changed mind"}`); out.Status != models.CallPending {
		t.Fatalf("another tool: %+v", out)
	}

	evs := e.grantEvents(g.ID)
	var kinds []string
	for _, ev := range evs {
		kinds = append(kinds, ev["kind"].(string))
	}
	if strings.Join(kinds, ",") != "grant.created,grant.used,grant.used" {
		t.Fatalf("the grant's audit trail: %v", kinds)
	}
	if evs[0]["source_call_id"] != g.SourceCallID || !strings.Contains(evs[0]["actor"].(string), "stf_sue") {
		t.Fatalf("grant.created: %v", evs[0])
	}
	used := evs[2]
	call := e.CallRecord(used["call_id"].(string))
	if call.Rule != gate.GrantRule+g.ID || call.Decision != "allow" || used["uses"] != 2.0 || used["amount"] != 100.0 ||
		!strings.HasPrefix(used["policy_reason"].(string), "Refund of $100.00") {
		t.Fatalf("grant.used %v for call %+v", used, call)
	}
	stored, err := e.Store.Grant(context.Background(), g.ID)
	if err != nil || stored.Uses != 2 || stored.StateAt(e.Clock.Now()) != models.GrantExhausted {
		t.Fatalf("stored grant: %+v %v", stored, err)
	}
	// Replaying the policy in force changes nothing: a granted call is one
	// the policy wanted a person to approve.
	rep, err := gate.ReplayPolicy(context.Background(), e.Store, e.Gate.Tools(), e.Gate.Policy(), e.Clock.Now().Add(-time.Hour))
	if err != nil || rep.Calls != 6 || rep.Unchanged != 6 {
		t.Fatalf("replay of the policy in force: %+v %v", rep, err)
	}
	// The audit chain holds, and every call row agrees with its events.
	if chain, err := e.Store.VerifyAuditChain(context.Background()); err != nil || !chain.OK {
		t.Fatalf("audit chain: %+v %v", chain, err)
	}
	if recs, err := audit.VerifyRecords(context.Background(), e.Store); err != nil || !recs.OK || recs.Calls != 6 {
		t.Fatalf("call rows against their events: %+v %v", recs, err)
	}
}

// A grant bounded by an amount takes refunds while their sum fits; one
// that would pass it waits for a person and does not eat the rest.
func TestGrantBoundedByAmount(t *testing.T) {
	e := newEnv(t)
	g := e.grantOn("cus_bob", "Bob", "B2001", 80, gate.GrantRequest{Amount: 15000, For: time.Hour})
	if out := e.refund("cus_bob", "B2001", 100); out.Status != models.CallSucceeded || out.Decision.Rule != gate.GrantRule+g.ID {
		t.Fatalf("$100 of $150: %+v", out)
	}
	if out := e.refund("cus_bob", "B2001", 60); out.Status != models.CallPending {
		t.Fatalf("$60 more would pass $150: %+v", out)
	}
	if out := e.refund("cus_bob", "B2001", 50); out.Decision.Rule == gate.GrantRule+g.ID {
		t.Fatalf("a refund the policy allows on its own should not use the grant: %+v", out)
	}
	stored, _ := e.Store.Grant(context.Background(), g.ID)
	if stored.Uses != 1 || stored.UsedCents != 10000 {
		t.Fatalf("stored grant: %+v", stored)
	}
}

// A grant expires on the clock and can be revoked; both stop it at once,
// and revoking needs a supervisor.
func TestGrantExpiresAndIsRevoked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	g := e.grantOn("cus_alice", "Alice", "A1002", 100, gate.GrantRequest{Uses: 10, For: 2 * time.Hour})
	e.Clock.Advance(119 * time.Minute)
	if out := e.refund("cus_alice", "A1002", 60); out.Status != models.CallSucceeded {
		t.Fatalf("a minute before it expires: %+v", out)
	}
	e.Clock.Advance(time.Minute)
	if out := e.refund("cus_alice", "A1002", 60); out.Status != models.CallPending {
		t.Fatalf("once expired: %+v", out)
	}
	if _, err := e.Gate.RevokeGrant(ctx, g.ID, supervisor, "late"); fault.CodeOf(err) != fault.Conflict || !strings.Contains(fault.Message(err), "expired") {
		t.Fatalf("revoking an expired grant: %v", err)
	}

	g2 := e.grantOn("cus_bob", "Bob", "B2001", 100, gate.GrantRequest{Uses: 10, For: 24 * time.Hour})
	if out := e.refund("cus_bob", "B2001", 60); out.Status != models.CallSucceeded {
		t.Fatalf("under the second grant: %+v", out)
	}
	if _, err := e.Gate.RevokeGrant(ctx, g2.ID, approver1, "no"); fault.CodeOf(err) != fault.Forbidden {
		t.Fatalf("an approver revoking: %v", err)
	}
	revoked, err := e.Gate.RevokeGrant(ctx, g2.ID, supervisor, "the customer's account was flagged")
	if err != nil || revoked.RevokedAt == nil || revoked.StateAt(e.Clock.Now()) != models.GrantRevoked {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if out := e.refund("cus_bob", "B2001", 60); out.Status != models.CallPending {
		t.Fatalf("after revoking: %+v", out)
	}
	if _, err := e.Gate.RevokeGrant(ctx, g2.ID, supervisor, "again"); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("revoking twice: %v", err)
	}
	if _, err := e.Gate.RevokeGrant(ctx, "grant_nope", supervisor, ""); fault.CodeOf(err) != fault.NotFound {
		t.Fatalf("revoking what is not there: %v", err)
	}
	evs := e.grantEvents(g2.ID)
	last := evs[len(evs)-1]
	if last["kind"] != "grant.revoked" || last["reason"] != "the customer's account was flagged" || last["uses"] != 1.0 {
		t.Fatalf("grant.revoked: %v", last)
	}
}

// Who may give a grant, and on what: a supervisor or admin, for a signed-in
// customer, bounded, on an action one person decides. A refused grant
// refuses the approval with it: nothing is half-done.
func TestGrantIsRefusedWhereItWouldWeakenControl(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pending := func(customerID, order string, amount float64) string {
		out := e.Call(e.NewRun(customerID, "Alice"), customerID, "issue_refund", fmt.Sprintf(`{"order_id":%q,"amount":%v,"reason":"broken"}`, order, amount))
		if out.Status != models.CallPending {
			t.Fatalf("not pending: %+v", out)
		}
		return out.CallID
	}
	day := gate.GrantRequest{Uses: 3, For: 24 * time.Hour}
	cases := []struct {
		name  string
		actor models.Actor
		grant gate.GrantRequest
		code  fault.Code
		says  string
	}{
		{"an approver", approver1, day, fault.Forbidden, "only a supervisor or an admin"},
		{"no period", supervisor, gate.GrantRequest{Uses: 3}, fault.Invalid, "how long"},
		{"over 30 days", supervisor, gate.GrantRequest{Uses: 3, For: 31 * 24 * time.Hour}, fault.Invalid, "30 days"},
		{"no bound but time", supervisor, gate.GrantRequest{For: time.Hour}, fault.Invalid, "number of calls, an amount"},
		{"negative amount", supervisor, gate.GrantRequest{Amount: -5, For: time.Hour}, fault.Invalid, "positive"},
	}
	id := pending("cus_alice", "A1002", 100)
	for _, c := range cases {
		g := c.grant
		_, err := e.Gate.Approve(ctx, id, c.actor, gate.ApproveRequest{Grant: &g})
		if fault.CodeOf(err) != c.code || !strings.Contains(fault.Message(err), c.says) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if c := e.CallRecord(id); c.Status != models.CallPending {
		t.Fatalf("a refused grant approved the action: %s", c.Status)
	}

	// An anonymous customer cannot be recognised next time. (The demo's
	// tools refuse anonymous customers, so the waiting action is made here.)
	anon := &models.ToolCall{ID: models.NewID("call"), RunID: e.NewRun("", ""), Tool: "issue_refund", Risk: "high_write",
		Args: `{"amount":10,"order_id":"A1001","reason":"x"}`, ArgsHash: "h", Decision: "needs_approval", Status: models.CallPending,
		RequiredApprovals: 1}
	if err := e.Store.Write(ctx, func(tx *storage.Tx) error { return tx.CreateToolCall(anon) }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Gate.Approve(ctx, anon.ID, supervisor, gate.ApproveRequest{Grant: &day}); fault.CodeOf(err) != fault.Invalid ||
		!strings.Contains(fault.Message(err), "not signed in") {
		t.Fatalf("a grant for an anonymous customer: %v", err)
	}

	// A two-person action: a grant would let one person skip the second.
	two := pending("cus_bob", "B2001", 1200)
	if _, err := e.Gate.Approve(ctx, two, supervisor, gate.ApproveRequest{Grant: &day}); fault.CodeOf(err) != fault.Invalid ||
		!strings.Contains(fault.Message(err), "needs 2 approvals") {
		t.Fatalf("a grant on a two-person action: %v", err)
	}
	if res, err := e.Gate.Approve(ctx, two, supervisor, gate.ApproveRequest{}); err != nil || res.Approvals != 1 {
		t.Fatalf("the refused grant recorded the approval too: %+v %v", res, err)
	}

	// A grant never covers a call that needs two people, nor one the policy denies.
	g := e.grantOn("cus_alice", "Alice", "A1002", 100, gate.GrantRequest{Uses: 10, Amount: 500000, For: time.Hour})
	if out := e.refund("cus_alice", "A1002", 850); out.Status != models.CallPending || out.Decision.Approvals != 2 {
		t.Fatalf("a two-person refund under a grant: %+v", out)
	}
	if stored, _ := e.Store.Grant(ctx, g.ID); stored.Uses != 0 {
		t.Fatalf("the grant was used by a call it does not cover: %+v", stored)
	}
}

// Calls at once never take more uses than the grant has: the count is
// made in the transaction that records each call, serialized per customer.
func TestConcurrentCallsShareAGrantExactly(t *testing.T) {
	e := newEnv(t)
	g := e.grantOn("cus_bob", "Bob", "B2001", 60, gate.GrantRequest{Uses: 3, For: time.Hour})
	var wg sync.WaitGroup
	outs := make([]gate.Outcome, 8)
	for i := range outs {
		run := e.NewRun("cus_bob", "Bob")
		wg.Go(func() {
			o, err := e.Gate.Call(context.Background(), gate.CallRequest{RunID: run, CustomerID: "cus_bob", Tool: "issue_refund",
				Args: []byte(`{"order_id":"B2001","amount":60,"reason":"broken"}`)})
			if err != nil {
				t.Error(err)
			}
			outs[i] = o
		})
	}
	wg.Wait()
	granted, waiting := 0, 0
	for _, o := range outs {
		switch {
		case o.Decision.Rule == gate.GrantRule+g.ID && o.Status == models.CallSucceeded:
			granted++
		case o.Status == models.CallPending:
			waiting++
		}
	}
	if granted != 3 || waiting != 5 {
		t.Fatalf("%d granted and %d waiting of 8, want 3 and 5: %+v", granted, waiting, outs)
	}
	if stored, _ := e.Store.Grant(context.Background(), g.ID); stored.Uses != 3 {
		t.Fatalf("uses recorded: %d", stored.Uses)
	}
}

// A grant covers calls that come the way the call it was given on came: one
// given in Countersign's own conversation with a signed-in customer is not
// used by an outside agent that merely names the customer, and one given on
// an agent's call covers that agent's other sessions, not another agent's.
func TestGrantCoversCallsThatComeTheSameWay(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	agentRun := func(agentID, session string) string {
		id := models.NewID("run")
		if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
			return tx.CreateRun(&models.Run{ID: id, AgentID: agentID, Session: session, CustomerID: "cus_bob", CustomerName: "Bob",
				Channel: "agent:" + agentID, Status: "active"})
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	refund := func(run string) gate.Outcome {
		return e.Call(run, "cus_bob", "issue_refund", `{"order_id":"B2001","amount":60,"reason":"broken"}`)
	}
	own := e.grantOn("cus_bob", "Bob", "B2001", 60, gate.GrantRequest{Uses: 5, For: time.Hour})
	if out := refund(agentRun("agt_one", "s1")); out.Status != models.CallPending {
		t.Fatalf("an outside agent used a grant given in Countersign's own conversation: %+v", out)
	}
	if out := refund(e.NewRun("cus_bob", "Bob")); out.Decision.Rule != gate.GrantRule+own.ID {
		t.Fatalf("another of Countersign's conversations: %+v", out)
	}

	first := refund(agentRun("agt_one", "s2"))
	res, err := e.Gate.Approve(ctx, first.CallID, supervisor, gate.ApproveRequest{Grant: &gate.GrantRequest{Uses: 5, For: time.Hour}})
	if err != nil || res.Grant == nil || res.Grant.AgentID != "agt_one" {
		t.Fatalf("a grant on an agent's call: %+v %v", res, err)
	}
	if out := refund(agentRun("agt_one", "s3")); out.Decision.Rule != gate.GrantRule+res.Grant.ID {
		t.Fatalf("the same agent, another session: %+v", out)
	}
	if out := refund(agentRun("agt_two", "s1")); out.Status != models.CallPending {
		t.Fatalf("another agent used the first agent's grant: %+v", out)
	}
}

// A count-only grant on a tool with an amount is bounded by the amount
// approved: given on a $10 refund for 3 calls, it allows $30 in all, and a
// $700 refund waits for a person (as a supervisor reading "3 calls" means).
func TestCountOnlyGrantIsBoundedByTheApprovedAmount(t *testing.T) {
	e := newEnv(t)
	g := e.grantOn("cus_bob", "Bob", "B2001", 60, gate.GrantRequest{Uses: 3, For: time.Hour})
	if g.MaxCents != 18000 {
		t.Fatalf("the grant's total is %v, want 3 × $60", g.MaxCents)
	}
	if out := e.refund("cus_bob", "B2001", 700); out.Status != models.CallPending || out.Decision.Rule == gate.GrantRule+g.ID {
		t.Fatalf("a $700 refund under a grant given on $60: %+v", out)
	}
	if out := e.refund("cus_bob", "B2001", 60); out.Status != models.CallSucceeded || out.Decision.Rule != gate.GrantRule+g.ID {
		t.Fatalf("a $60 refund: %+v", out)
	}
	evs := e.grantEvents(g.ID)
	if evs[0]["max_amount"] != 180.0 || evs[0]["max_amount_default"] != true {
		t.Fatalf("grant.created: %v", evs[0])
	}
}
