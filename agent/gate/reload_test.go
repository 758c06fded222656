package gate_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// Putting a policy in force is one audited operation of the core: a policy
// that fails its own tests is refused and changes nothing; one that passes
// is audited, recorded as this host's version, and decides the waiting
// actions again; the same again records nothing.
func TestPutInForceIsAuditedAndRedecides(t *testing.T) {
	var runs atomic.Int64
	store := storetest.Open(t)
	tool := transferTool(t, transferV1, &runs)
	g := gateOver(t, store, tool)
	ctx := context.Background()
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	load := func(yaml string) *policy.FilePolicy {
		t.Helper()
		p, err := policy.LoadPolicy([]byte(yaml), "policy.yaml", reg)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
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
	before := g.Policy().Version()

	lying := load("rules:\n  - name: no transfers\n    tool: transfer\n    decision: deny\ntests:\n  - name: says allow\n    tool: transfer\n    expect: allow\n")
	if _, err := g.PutInForce(ctx, gate.Loaded{Tools: reg, Policy: lying, PolicyFile: "policy.yaml", Why: "reload", Host: "h1"}); err == nil ||
		!strings.Contains(err.Error(), "fails 1 of its tests") {
		t.Fatalf("a policy failing its tests: %v", err)
	}
	if g.Policy().Version() != before {
		t.Fatal("a refused policy was put in force")
	}

	deny := load("rules:\n  - name: no transfers\n    tool: transfer\n    decision: deny\n    reason: transfers are off\n")
	changed, err := g.PutInForce(ctx, gate.Loaded{Tools: reg, ToolsVersion: "tv1", Policy: deny, PolicyFile: "policy.yaml", Why: "reload", Host: "h1"})
	if err != nil || !changed {
		t.Fatalf("put in force: %v %v", changed, err)
	}
	if g.Policy().Version() != deny.Version() || g.ToolsVersion() != "tv1" {
		t.Fatalf("in force: policy %s tools %q", g.Policy().Version(), g.ToolsVersion())
	}
	for subject, kind := range map[string]models.EventKind{deny.Version(): models.EventPolicyReloaded, "tv1": models.EventToolsReloaded} {
		events, err := store.AuditEventsFor(ctx, subject)
		if err != nil || len(events) != 1 || events[0].Kind != kind {
			t.Fatalf("audit of %s: %+v %v", kind, events, err)
		}
	}
	if c, _ := store.ToolCall(ctx, out.CallID); c.Status != models.CallCancelled {
		t.Fatalf("the waiting call the new policy denies is %s, want cancelled", c.Status)
	}
	if self, err := store.InstanceRow(ctx, store.Instance()); err != nil || self.PolicyVersion != deny.Version() || self.ToolsVersion != "tv1" {
		t.Fatalf("recorded versions: %+v %v", self, err)
	}

	if changed, err := g.PutInForce(ctx, gate.Loaded{Tools: reg, ToolsVersion: "tv1", Policy: deny, Why: "reload", Host: "h1"}); err != nil || changed {
		t.Fatalf("the same again: %v %v", changed, err)
	}
	if events, _ := store.AuditEventsFor(ctx, deny.Version()); len(events) != 1 {
		t.Fatalf("the same policy again was audited again: %d events", len(events))
	}
	if runs.Load() != 0 {
		t.Fatal("the tool ran")
	}
}
