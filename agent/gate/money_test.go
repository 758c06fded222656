package gate_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// Totals add money exactly: ten tips of $0.10 are $1.00, so a rule that
// stops tips at a dollar stops the eleventh. Added as float64, ten 0.1 are
// 0.9999999999999999 (as PostgreSQL summed them in double precision), and
// the eleventh went through.
func TestTotalsAddMoneyExactly(t *testing.T) {
	tip, err := tools.FromSpec(tools.Spec{Name: "tip", Risk: tools.RiskLowWrite, Amount: "amount",
		Schema: []byte(`{"type":"object","properties":{"amount":{"type":"number","exclusiveMinimum":0}},"required":["amount"],"additionalProperties":false}`),
		Run:    func(context.Context, tools.Call, map[string]any) (any, error) { return map[string]any{"ok": true}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tip)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy([]byte(`
totals:
  tipped:
    tool: tip
    sum: amount
rules:
  - name: a-dollar-at-most
    tool: tip
    when: totals.tipped >= 1.0
    decision: deny
    reason: "{{ money(totals.tipped) }} tipped already"
defaults:
  low_write:
    decision: allow
`), "tips.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	store := storetest.Open(t)
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol})
	t.Cleanup(g.Close)
	ctx := context.Background()
	runID := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_1", Channel: "test", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	var floats, ten float64
	for i := range 11 {
		out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_1", Tool: "tip", Args: []byte(`{"amount":0.1}`)})
		if err != nil {
			t.Fatal(err)
		}
		want := models.CallSucceeded
		if i == 10 {
			want = models.CallDenied
		}
		if out.Status != want {
			t.Fatalf("tip %d: %s (%s), want %s; float64 would have summed %v", i+1, out.Status, out.Decision.Reason, want, floats)
		}
		if i == 10 && out.Decision.Reason != "$1.00 tipped already" {
			t.Fatalf("the reason: %q", out.Decision.Reason)
		}
		floats += 0.1
		if i == 9 {
			ten = floats
		}
	}
	if ten >= 1.0 {
		t.Fatalf("this test means to add sums that float64 gets wrong: ten 0.1 are %v", ten)
	}
}
