package outbox_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// BenchmarkGateCallWithOutbox is an allowed read through the gate (as
// agent's BenchmarkGateCall) with nothing to reach, with Slack configured
// (a finished read is not told to Slack, but the outbox reads the call to
// know it) and with a webhook (every finished call is told: one delivery
// inserted in the call's transaction). Nothing is sent: this is what the
// gate pays. Compare the three in one run.
func BenchmarkGateCallWithOutbox(b *testing.B) {
	slackHook := func(store *storage.Store) outbox.Channel {
		c, err := slack.New(slack.Config{Webhook: "https://hooks.slack.invalid/x", Store: store})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	for _, ch := range []struct {
		name     string
		channels []func(*storage.Store) outbox.Channel
	}{
		{"off", nil},
		{"slack", []func(*storage.Store) outbox.Channel{slackHook}},
		{"webhook", []func(*storage.Store) outbox.Channel{hooks(b, "s", "https://receiver.invalid/hook")}},
	} {
		for _, callers := range []int{1, 16} {
			name := ch.name + "/serial"
			if callers > 1 {
				name = ch.name + "/callers16"
			}
			b.Run(name, func(b *testing.B) {
				e := outboxtest.New(b, "", demo.Shop, outbox.Config{}, ch.channels...)
				if ch.channels == nil {
					e.Store.SetOutbox(nil) // what serve does when nothing is configured
				}
				run := models.NewID("run")
				ctx := context.Background()
				if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
					return tx.CreateRun(&models.Run{ID: run, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "test", Status: models.RunActive})
				}); err != nil {
					b.Fatal(err)
				}
				req := gate.CallRequest{RunID: run, CustomerID: "cus_alice", Tool: "get_order_status", Args: []byte(`{"order_id":"A1002"}`)}
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				if callers == 1 {
					for i := 0; i < b.N; i++ {
						if out, err := e.Gate.Call(ctx, req); err != nil || out.Status != models.CallSucceeded {
							b.Fatal(out, err)
						}
					}
				} else {
					procs := runtime.GOMAXPROCS(0)
					b.SetParallelism((callers + procs - 1) / procs)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if out, err := e.Gate.Call(ctx, req); err != nil || out.Status != models.CallSucceeded {
								b.Error(out, err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
			})
		}
	}
}
