package runloop_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/demo/offline"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
)

// BenchmarkConversation is a whole conversation with the offline model: a
// customer asks where an order is, the model calls the tool through the
// gate, and answers. Everything is recorded in SQLite.
func BenchmarkConversation(b *testing.B) {
	e := newEnv(b)
	r := e.runner(offline.Model{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st, err := r.StartRun(ctx, runloop.StartRequest{CustomerID: "cus_alice", CustomerName: "Alice", Message: "Where is my order A1002?"})
			if err != nil {
				b.Error(err)
				return
			}
			<-st.Done
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "conversations/s")
}

// BenchmarkApprovalToResume measures the time from a staff approval to the
// paused run being back to "waiting" with the model's confirmation stored.
func BenchmarkApprovalToResume(b *testing.B) {
	e := newEnv(b)
	r := e.runner(offline.Model{})
	ctx := context.Background()
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	e.Notes.OnRun(func(ev runloop.Event) {
		if ev.Status != models.RunWaiting {
			return
		}
		mu.Lock()
		if ch := waiting[ev.RunID]; ch != nil {
			close(ch)
			delete(waiting, ev.RunID)
		}
		mu.Unlock()
	})
	// One fresh order per approval, so that every refund succeeds.
	orders := make([]shop.Order, b.N)
	for i := range orders {
		orders[i] = shop.Order{ID: fmt.Sprintf("C%07d", i), CustomerID: "cus_bob", Status: shop.OrderDelivered, TotalCents: 100000, Items: "Bench item"}
	}
	if err := shop.On(e.Store).AddOrders(ctx, orders); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// A day apart, so that each $60 refund is the customer's only one in
		// the policy's 24-hour window and needs one approval, as the first does.
		e.Clock.Advance(25 * time.Hour)
		st, err := r.StartRun(ctx, runloop.StartRequest{CustomerID: "cus_bob", CustomerName: "Bob", Message: fmt.Sprintf("refund $60 on order C%07d", i)})
		if err != nil {
			b.Fatal(err)
		}
		<-st.Done
		calls, _ := e.Store.RunCalls(ctx, st.Run.ID)
		ch := make(chan struct{})
		mu.Lock()
		waiting[st.Run.ID] = ch
		mu.Unlock()
		b.StartTimer()
		t0 := time.Now()
		if _, err := e.Gate.Approve(ctx, calls[0].ID, approver1, gate.ApproveRequest{}); err != nil {
			b.Fatal(err)
		}
		<-ch
		lat = append(lat, time.Since(t0))
		if c, _ := e.Store.ToolCall(ctx, calls[0].ID); c.Status != models.CallSucceeded {
			b.Fatalf("refund %s: %s", c.Status, c.Error)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
