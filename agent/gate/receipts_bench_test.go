package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
)

// BenchmarkGateCallReceipts is BenchmarkGateCall's allowed read with the
// receipts' signer off and on (each call that ends is signed and its
// receipt written, in batches, beside the gate), and "within": each call
// asked as an MCP client asks (gate.WantsReceipt), whose receipt is signed
// and kept in the unit that records its outcome, so that its answer carries
// it. Measured in one run: the cost of a receipt per call is the ratio to
// "off". With COUNTERSIGN_TEST_POSTGRES set it runs on PostgreSQL.
func BenchmarkGateCallReceipts(b *testing.B) {
	for _, signing := range []string{"off", "on", "within"} {
		for _, callers := range []int{1, 16} {
			name := signing + map[int]string{1: "/serial", 16: "/callers16"}[callers]
			b.Run(name, func(b *testing.B) {
				e := newEnv(b)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if signing != "off" {
					go e.Core.Receipts.Run(ctx)
				}
				asked, then := context.Background(), (func(gate.Outcome) error)(nil)
				if signing == "within" { // and the answer takes it, as an MCP result's does
					asked = gate.WantsReceipt(asked)
					then = func(out gate.Outcome) error {
						_, err := e.Core.Receipts.Fresh(ctx, &models.ToolCall{ID: out.CallID, Status: out.Status})
						return err
					}
				}
				run := e.NewRun("cus_alice", "Alice")
				req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
				b.ReportAllocs()
				b.ResetTimer()
				callAllowedRead(asked, b, e.Gate, req, callers, then)
				b.StopTimer()
				if signing != "off" { // every call signed, not left behind: how long the lag took to catch up
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
