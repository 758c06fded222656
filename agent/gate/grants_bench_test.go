package gate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// BenchmarkGatePendingCall is a call the policy sends to a person, which is
// where the gate looks for a standing grant: with no grants at all, and
// with 10,000 grants in force for other customers (the lookup is by
// customer and tool, so it should cost the same). The ratio of the two
// calls/s, measured in one run, is what BENCHMARKS.md reports.
func BenchmarkGatePendingCall(b *testing.B) {
	for _, bc := range []struct {
		name   string
		grants int
	}{{"no_grants", 0}, {"10k_other_grants", 10000}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b)
			e.Gate.Limits = gate.Limits{MaxPendingPerRun: 1 << 30, MaxPendingPerCustomer: 1 << 30}
			ctx := context.Background()
			for done := 0; done < bc.grants; done += 1000 {
				err := e.Store.Write(ctx, func(tx *storage.Tx) error {
					for i := done; i < done+1000 && i < bc.grants; i++ {
						g := &models.Grant{ID: models.NewID("grant"), Tool: "cancel_order", CustomerID: fmt.Sprintf("cus_%d", i),
							MaxUses: 5, ExpiresAt: tx.Now().Add(24 * time.Hour), Role: models.Supervisor, CreatedBy: "bench"}
						if err := tx.CreateGrant(g); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			run := e.NewRun("cus_alice", "Alice")
			req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "cancel_order", Args: []byte(`{"order_id":"A1003","reason":"changed mind"}`)}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if out, err := e.Gate.Call(ctx, req); err != nil || out.Status != models.CallPending {
					b.Fatal(out, err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
