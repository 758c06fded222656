package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/agenttest"
	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// An edit cannot walk an action out of a rule's requirements: an approver
// edits a $60 refund (one approval, no passkey) to $1,200, which falls
// under a rule asking two people, a supervisor, a passkey and a one-hour
// expiry. The editor must sign with a passkey, the edited action keeps
// every requirement of the stricter rule (recorded as a re-decision in the
// audit log), and a supervisor's approval without a passkey is refused:
// it runs only when both verdicts are signed.
func TestAnEditCarriesThePasskeyOfTheStricterRule(t *testing.T) {
	yaml := strings.Replace(string(shop.PolicyYAML), `    approvals: 2
    role: supervisor
    expires: 24h
`, `    approvals: 2
    role: supervisor
    expires: 1h
    passkey: true
`, 1)
	if !strings.Contains(yaml, "passkey: true") {
		t.Fatal("the shop's policy no longer has the two-person rule this test changes")
	}
	e := &env{agenttest.New(t, demo.Shop, func(c *core.Config) {
		p, err := policy.LoadPolicy([]byte(yaml), "passkey", c.Tools)
		if err != nil {
			t.Fatal(err)
		}
		c.Policy = p
	})}
	ctx := context.Background()
	out := e.Call(e.NewRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":60}`)
	if out.Status != models.CallPending || out.Decision.Rule != "refund-needs-approval" {
		t.Fatalf("the $60 refund: %+v", out)
	}
	before := e.CallRecord(out.CallID)
	tool, _ := e.Gate.Tools().Get("issue_refund")
	edited := []byte(`{"order_id":"B2001","amount":1200}`)
	norm, err := tool.Normalize(edited)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(who string) *models.PasskeySignature {
		// What the back office checked against the person's passkey
		// (agent/accounts): the gate holds it to the call as it stands.
		return &models.PasskeySignature{CredentialID: "cred-" + who, CallID: out.CallID, ArgsHash: norm.Hash, Verdict: "approve",
			SummaryDigest: models.SummaryDigest(tool.Summarize(string(norm.JSON)))}
	}

	// The editor without a passkey: refused, and nothing changed.
	if _, err := e.Gate.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{Args: edited}); !errors.Is(err, models.ErrPasskeyNeeded) {
		t.Fatalf("an edit into a passkey rule without one: %v", err)
	}
	if now := e.CallRecord(out.CallID); now.ArgsHash != before.ArgsHash || now.PasskeyRequired {
		t.Fatalf("a refused edit changed the action: %+v", now)
	}
	// With one: one approval of two, and the action keeps the rule's every requirement.
	res, err := e.Gate.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{Args: edited, Passkey: signed("ann")})
	if err != nil || res.Final || res.Required != 2 {
		t.Fatalf("the signed edit: %+v %v", res, err)
	}
	rec := e.CallRecord(out.CallID)
	if !rec.PasskeyRequired || rec.RequiredRole != models.Supervisor || rec.ExpiresAt == nil || rec.ExpiresAt.After(e.Clock.Now().Add(time.Hour)) {
		t.Fatalf("the edited action's requirements: passkey %v, role %q, expires %v (now %v)", rec.PasskeyRequired, rec.RequiredRole, rec.ExpiresAt, e.Clock.Now())
	}
	if !e.Gate.AsksPasskeyOf(rec) {
		t.Fatal("the back office would not ask for a passkey on the edited action")
	}
	evs, _ := e.Store.AuditEventsFor(ctx, out.CallID)
	var redecided bool
	for _, ev := range evs {
		if ev.Kind == models.EventActionEdited && strings.Contains(ev.Payload, `"passkey":true`) &&
			strings.Contains(ev.Payload, `"edit_rule":"refund-over-1000-two-person"`) && strings.Contains(ev.Payload, `"expires_at"`) {
			redecided = true
		}
	}
	if !redecided {
		t.Fatalf("the audit log does not record the re-decision with its passkey and expiry: %+v", evs)
	}
	// The supervisor over the API, no passkey: refused; nothing ran.
	if _, err := e.Gate.Approve(ctx, out.CallID, supervisor, gate.ApproveRequest{}); !errors.Is(err, models.ErrPasskeyNeeded) {
		t.Fatalf("the second approval without a passkey: %v", err)
	}
	if e.Executions["issue_refund"].Load() != 0 || e.CallRecord(out.CallID).Status != models.CallPending {
		t.Fatal("the edited refund ran without the passkeys its rule asks for")
	}
	res, err = e.Gate.Approve(ctx, out.CallID, supervisor, gate.ApproveRequest{Passkey: signed("sam")})
	if err != nil || !res.Final || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("the signed second approval: %+v %v", res, err)
	}
	if e.Order("B2001").RefundedCents != 120000 {
		t.Fatal("the edited refund was not made")
	}
}
