package gate_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// approvedThenStopped records what an approval that completes an action
// records (as Approve's transaction does), and leaves the call approved
// and not yet run, as a process stopped between the two leaves it.
func approvedThenStopped(t *testing.T, g *gate.Gate, store *storage.Store, callID string, who models.Actor) {
	t.Helper()
	err := store.Write(context.Background(), func(tx *storage.Tx) error {
		c, err := tx.ToolCall(callID)
		if err != nil {
			return err
		}
		tool, _ := g.Tools().Get(c.Tool)
		if err := tx.CreateApproval(&models.Approval{ToolCallID: c.ID, StaffID: who.ID, StaffName: who.Name, StaffRole: who.Role, Verdict: "approve",
			Args: c.Args, ArgsHash: c.ArgsHash, ToolHash: tool.DefinitionHash(), PolicyVersion: g.Policy().Version()}); err != nil {
			return err
		}
		if err := tx.ChangeCallStatus(models.CallChange{ID: c.ID, From: []models.CallStatus{models.CallPending}, To: models.CallApproved}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: who.String(), Kind: models.EventActionApproved, Subject: c.ID,
			Payload: models.ActionApprovalPayload{ArgsHash: c.ArgsHash, Approvals: 1, Required: 1}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An approved call runs only while what its approvers signed under holds:
// a tool whose definition changed, a policy replaced by one that denies it
// or asks more, or an approver disabled since, and the call ends
// invalidated with the reason in words; the tool receives nothing.
func TestAnApprovedCallRunsOnlyAsApproved(t *testing.T) {
	const denies = `
rules:
  - name: no-transfers
    tool: transfer
    decision: deny
    reason: transfers are stopped
defaults:
  high_write: {decision: needs_approval, reason: a person decides}
`
	const asksTwo = `
rules:
  - name: transfers-two-people
    tool: transfer
    decision: needs_approval
    approvals: 2
    reason: two people
defaults:
  high_write: {decision: needs_approval, reason: a person decides}
`
	for _, c := range []struct {
		name   string
		change func(t *testing.T, g *gate.Gate, acc *accounts.Service, ann, ada models.Actor, runs *atomic.Int64)
		want   string // "" runs
	}{
		{"nothing changed", func(*testing.T, *gate.Gate, *accounts.Service, models.Actor, models.Actor, *atomic.Int64) {}, ""},
		{"the tool's definition changed", func(t *testing.T, g *gate.Gate, _ *accounts.Service, _, _ models.Actor, runs *atomic.Int64) {
			reloadTools(t, g, transferTool(t, transferV1b, runs)) // the arguments still fit
		}, "the tool's definition changed after it was approved: nothing was done; ask again"},
		{"the policy now denies it", func(t *testing.T, g *gate.Gate, _ *accounts.Service, _, _ models.Actor, _ *atomic.Int64) {
			pol, err := policy.LoadPolicy([]byte(denies), "policy.yaml", g.Tools())
			if err != nil {
				t.Fatal(err)
			}
			g.Reload(g.Tools(), pol)
		}, "the policy in force now denies it (rule no-transfers: transfers are stopped): nothing was done"},
		{"the policy now asks two people", func(t *testing.T, g *gate.Gate, _ *accounts.Service, _, _ models.Actor, _ *atomic.Int64) {
			pol, err := policy.LoadPolicy([]byte(asksTwo), "policy.yaml", g.Tools())
			if err != nil {
				t.Fatal(err)
			}
			g.Reload(g.Tools(), pol)
		}, "the policy in force now asks for 2 approvals by different people"},
		{"the approver was disabled", func(t *testing.T, _ *gate.Gate, acc *accounts.Service, ann, ada models.Actor, _ *atomic.Int64) {
			if err := acc.SetDisabled(context.Background(), ann.ID, true, ada); err != nil {
				t.Fatal(err)
			}
		}, "an approver's account was disabled after they approved it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			var runs atomic.Int64
			store := storetest.Open(t)
			g := gateOver(t, store, transferTool(t, transferV1, &runs))
			acc := accounts.New(store)
			add := func(email string, role models.StaffRole) models.Actor {
				st, err := acc.AddStaff(ctx, email, email, role, "correct horse battery staple", models.SystemActor)
				if err != nil {
					t.Fatal(err)
				}
				return st.Actor()
			}
			ann, ada := add("ann@x.test", models.Approver), add("ada@x.test", models.Admin)
			runID := models.NewID("run")
			if err := store.Write(ctx, func(tx *storage.Tx) error {
				return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_1", Channel: "test", Status: models.RunActive})
			}); err != nil {
				t.Fatal(err)
			}
			out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_1", Tool: "transfer", Args: []byte(`{"to":"acct_9"}`)})
			if err != nil || out.Status != models.CallPending {
				t.Fatalf("call: %+v %v", out, err)
			}
			approvedThenStopped(t, g, store, out.CallID, ann)
			c.change(t, g, acc, ann, ada, &runs)
			ran, err := g.ExecuteApproved(ctx, out.CallID)
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := store.ToolCall(ctx, out.CallID)
			if c.want == "" {
				if ran.Status != models.CallSucceeded || runs.Load() != 1 {
					t.Fatalf("nothing changed, yet: %+v, ran %d times", ran, runs.Load())
				}
				return
			}
			if ran.Status != models.CallInvalidated || rec.Status != models.CallInvalidated || !strings.Contains(rec.Error, c.want) {
				t.Fatalf("outcome %s, record %s %q; want invalidated, %q", ran.Status, rec.Status, rec.Error, c.want)
			}
			if runs.Load() != 0 {
				t.Fatalf("the tool ran %d times", runs.Load())
			}
			events, err := store.AuditEventsFor(ctx, out.CallID)
			if err != nil || events[len(events)-1].Kind != models.EventCallInvalidated || !strings.Contains(events[len(events)-1].Payload, c.want) {
				t.Fatalf("the audit's last word on the call: %+v %v", events[len(events)-1], err)
			}
			if recs, err := audit.VerifyRecords(ctx, store); err != nil || !recs.OK {
				t.Fatalf("records against the audit: %+v %v", recs, err)
			}
			// Asked again, it cannot run twice: invalidated is final.
			if _, err := g.ExecuteApproved(ctx, out.CallID); err == nil {
				t.Fatal("an invalidated call was claimed again")
			}
		})
	}
}
