package gate_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// transferTool is a high-risk write whose input schema a test can change.
func transferTool(t *testing.T, schema string, runs *atomic.Int64) *tools.Tool {
	t.Helper()
	tool, err := tools.FromSpec(tools.Spec{Name: "transfer", Risk: tools.RiskHighWrite, Schema: []byte(schema),
		Run: func(context.Context, tools.Call, map[string]any) (any, error) {
			runs.Add(1)
			return map[string]any{"ok": true}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

const (
	transferV1 = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"],"additionalProperties":false}`
	// v2 needs a currency: a call made against v1 no longer fits.
	transferV2 = `{"type":"object","properties":{"to":{"type":"string"},"currency":{"type":"string"}},"required":["to","currency"],"additionalProperties":false}`
	// v1b only says more: v1's calls still fit.
	transferV1b = `{"type":"object","description":"now with a note","properties":{"to":{"type":"string"}},"required":["to"],"additionalProperties":false}`
)

// gateOver is a gate over these tools under the built-in default policy,
// on store, closed after the test.
func gateOver(t *testing.T, store *storage.Store, ts ...*tools.Tool) *gate.Gate {
	t.Helper()
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol})
	t.Cleanup(g.Close)
	return g
}

func reloadTools(t *testing.T, g *gate.Gate, tool *tools.Tool) {
	t.Helper()
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	g.Reload(reg, pol)
}

// A tool changed while its action waited: approving the old arguments is
// refused with the reason (an edit that fits goes through); a call already
// approved fails with its reason instead of staying approved for ever, and
// recovery (what a start runs) carries on past it.
func TestAChangedToolNeverLeavesACallStuck(t *testing.T) {
	var runs atomic.Int64
	store := storetest.Open(t)
	v1 := transferTool(t, transferV1, &runs)
	g := gateOver(t, store, v1)
	ctx := context.Background()
	runID := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_1", Channel: "test", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	ask := func() string {
		out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_1", Tool: "transfer", Args: []byte(`{"to":"acct_9"}`)})
		if err != nil || out.Status != models.CallPending {
			t.Fatalf("call: %+v %v", out, err)
		}
		return out.CallID
	}
	first, second, third := ask(), ask(), ask()
	if c, _ := store.ToolCall(ctx, first); c.ToolHash != v1.DefinitionHash() {
		t.Fatalf("the call recorded tool hash %q, want %q", c.ToolHash, v1.DefinitionHash())
	}
	// third is approved by one person just before the change, and is caught
	// approved (as a crash between approval and execution leaves it).
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.ChangeCallStatus(models.CallChange{ID: third, From: []models.CallStatus{models.CallPending}, To: models.CallApproved}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "staff:test", Kind: models.EventActionApproved, Subject: third, Payload: models.ActionApprovalPayload{}})
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateApproval(&models.Approval{ToolCallID: third, StaffID: approver1.ID, StaffName: approver1.Name, StaffRole: approver1.Role, Verdict: "approve"})
	}); err != nil {
		t.Fatal(err)
	}

	reloadTools(t, g, transferTool(t, transferV2, &runs))
	_, err := g.Approve(ctx, first, approver1, gate.ApproveRequest{})
	if fault.CodeOf(err) != fault.Conflict || !strings.Contains(err.Error(), "changed since this call was made") {
		t.Fatalf("approving arguments that no longer fit: %v", err)
	}
	if c, _ := store.ToolCall(ctx, first); c.Status != models.CallPending {
		t.Fatalf("after the refused approval the call is %s", c.Status)
	}
	res, err := g.Approve(ctx, first, approver1, gate.ApproveRequest{Args: []byte(`{"to":"acct_9","currency":"EUR"}`)})
	if err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("an edit that fits: %+v %v", res, err)
	}

	rerun, unknown, err := g.RecoverInterrupted(ctx, 0)
	if err != nil || rerun != 1 || unknown != 0 {
		t.Fatalf("recovery past a call that cannot run: rerun %d unknown %d %v", rerun, unknown, err)
	}
	c, _ := store.ToolCall(ctx, third)
	if c.Status != models.CallInvalidated || !strings.Contains(c.Error, "no longer fit") || !strings.Contains(c.Error, "nothing was done") {
		t.Fatalf("the approved call that cannot run: %s %q", c.Status, c.Error)
	}

	// A change that leaves the arguments fitting is only a warning: the
	// call approved runs.
	reloadTools(t, g, transferTool(t, transferV1b, &runs))
	if res, err := g.Approve(ctx, second, approver1, gate.ApproveRequest{}); err != nil || res.Outcome == nil || res.Outcome.Status != models.CallSucceeded {
		t.Fatalf("approve after a harmless change: %+v %v", res, err)
	}
	if runs.Load() != 2 {
		t.Fatalf("ran %d times, want 2", runs.Load())
	}
	if recs, err := audit.VerifyRecords(ctx, store); err != nil || !recs.OK {
		t.Fatalf("records against the audit: %+v %v", recs, err)
	}
}
