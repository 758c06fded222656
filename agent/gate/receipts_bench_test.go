package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
)

// BenchmarkGateCallReceipts is BenchmarkGateCall's allowed read with the
// receipts' signer off and on (each call that ends is signed and its
// receipt written, in batches, beside the gate), measured in one run: the
// cost of a receipt per call is the ratio of the two. With
// COUNTERSIGN_TEST_POSTGRES set it runs on PostgreSQL.
func BenchmarkGateCallReceipts(b *testing.B) {
	for _, signing := range []bool{false, true} {
		for _, callers := range []int{1, 16} {
			name := map[bool]string{false: "off", true: "on"}[signing] + map[int]string{1: "/serial", 16: "/callers16"}[callers]
			b.Run(name, func(b *testing.B) {
				e := newEnv(b)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if signing {
					go e.Core.Receipts.Run(ctx)
				}
				run := e.NewRun("cus_alice", "Alice")
				req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
				b.ReportAllocs()
				b.ResetTimer()
				callAllowedRead(b, e.Gate, req, callers)
				b.StopTimer()
				if signing { // every call signed, not left behind: how long the lag took to catch up
					caught := time.Now()
					defer func() { b.ReportMetric(time.Since(caught).Seconds(), "s-to-catch-up") }()
					deadline := time.Now().Add(120 * time.Second)
					for time.Now().Before(deadline) {
						if ids, _ := e.Store.CallsWithoutReceipt(ctx, time.Time{}, 1); len(ids) == 0 {
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
					if ids, _ := e.Store.CallsWithoutReceipt(ctx, time.Time{}, 1); len(ids) != 0 {
						b.Fatalf("calls left without a receipt: %v", ids)
					}
				}
			})
		}
	}
}
