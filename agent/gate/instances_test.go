package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// Two instances on one database: what one is running is never taken by the
// other's recovery while it beats; once it has left (or stopped beating),
// the other takes it over, once.
func TestRecoveryLeavesALiveInstancesCallsAlone(t *testing.T) {
	dsn := storetest.DSN(t)
	ctx := context.Background()
	a, _ := instanceOn(t, dsn)
	b, gateB := instanceOn(t, dsn)
	if _, err := shop.On(a).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Beat(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Beat(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	// A is running a refund (as far as the database can tell).
	run, id := models.NewID("run"), models.NewID("call")
	err := a.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", Channel: "api", Status: models.RunActive}); err != nil {
			return err
		}
		return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: run, CustomerID: "cus_alice", Tool: "issue_refund", Risk: "high_write",
			Args: `{"amount":20,"order_id":"A1001"}`, Status: models.CallExecuting, Decision: "allow", IdempotencyKey: gate.IdempotencyKey(id)})
	})
	if err != nil {
		t.Fatal(err)
	}
	rerun, unknown, err := gateB.RecoverInterrupted(ctx, models.InstanceAlive)
	if c, _ := b.ToolCall(ctx, id); err != nil || rerun+unknown != 0 || c.Status != models.CallExecuting || c.Owner != a.Instance() {
		t.Fatalf("B took a live instance's call: rerun %d unknown %d %v, %s owned by %s", rerun, unknown, err, c.Status, c.Owner)
	}
	// A goes away: B re-runs the idempotent refund, once.
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	rerun, _, err = gateB.RecoverInterrupted(ctx, models.InstanceAlive)
	c, _ := b.ToolCall(ctx, id)
	if err != nil || rerun != 1 || c.Status != models.CallSucceeded || c.Owner != b.Instance() {
		t.Fatalf("after A left: rerun %d %v, %s owned by %s", rerun, err, c.Status, c.Owner)
	}
	if rerun, _, _ = gateB.RecoverInterrupted(ctx, models.InstanceAlive); rerun != 0 {
		t.Fatal("recovered twice")
	}
	rs, _ := shop.On(b).OrderRefunds(ctx, "A1001")
	if len(rs) != 1 {
		t.Fatalf("%d refunds", len(rs))
	}
	// An instance that stops beating counts as gone after InstanceAlive.
	if live, _ := b.LiveInstances(ctx, models.InstanceAlive); len(live) != 1 || live[0].ID != b.Instance() {
		t.Fatalf("live instances: %+v", live)
	}
	if live, _ := b.LiveInstances(ctx, -time.Second); len(live) != 0 {
		t.Fatalf("an instance counted as alive past its time: %+v", live)
	}
}

// instanceOn is one instance on the database at dsn: its own store, and a
// gate with the demo shop's tools and policy; both end with the test.
func instanceOn(t testing.TB, dsn string) (*storage.Store, *gate.Gate) {
	t.Helper()
	s, err := storage.Open(dsn, storage.Options{Own: shop.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	reg, _ := tools.NewRegistry(shop.Tools(s)...)
	pol, err := policy.LoadPolicy(shop.PolicyYAML, "demo", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: s, Tools: reg, Policy: pol, Business: shop.Facts{Store: s}})
	t.Cleanup(g.Close)
	return s, g
}
