package outbox_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/outbox/outboxtest"
	"github.com/countersign/countersign/channels/webhook"
	"github.com/countersign/countersign/demo"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// hooks is a webhook channel to urls, signed with secret.
func hooks(t testing.TB, secret string, urls ...string) func(*storage.Store) outbox.Channel {
	return func(*storage.Store) outbox.Channel {
		ch, err := webhook.New(webhook.Config{URLs: urls, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}

// Deliveries are stored with the change: made while nothing sends them
// (the server stopped before it could), they go out after a restart. A
// receiver that keeps failing is given up after the last attempt.
func TestDeliveriesSurviveARestart(t *testing.T) {
	rcv := &outboxtest.Receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	dsn := storetest.DSN(t)
	first := outboxtest.New(t, dsn, demo.Shop, outbox.Config{}, hooks(t, "s", srv.URL))
	out := first.Refund("cus_bob", "Bob", `{"order_id":"B2001","amount":1200}`)
	if out.Status != models.CallPending {
		t.Fatalf("refund: %s", out.Status)
	}
	first.Store.Close()
	if n := len(rcv.All()); n != 0 {
		t.Fatalf("%d sent before the restart", n)
	}
	again := outboxtest.New(t, dsn, demo.Shop, outbox.Config{}, hooks(t, "s", srv.URL))
	again.Deliver()
	got := rcv.All()
	if len(got) != 1 || got[0].Event != "action.pending" || !strings.Contains(string(got[0].Body), out.CallID) {
		t.Fatalf("after the restart: %+v", got)
	}

	// A receiver that never answers 2xx: MaxAttempts, then given up.
	rcv.Mu.Lock()
	rcv.Failures = 1000
	rcv.Mu.Unlock()
	for _, st := range []*models.Staff{again.Staff(models.Supervisor, "sue@example.com", "Sue"), again.Staff(models.Approver, "ann@example.com", "Ann")} {
		if _, err := again.Gate.Approve(context.Background(), out.CallID, st.Actor(), gate.ApproveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < outbox.MaxAttempts+2; i++ {
		again.Deliver()
		again.Clock.Add(time.Hour + time.Minute)
	}
	ds, _ := again.Store.DeliveriesAbout(context.Background(), out.CallID)
	if len(ds) != 3 || ds[1].Event != "action.decided" || ds[1].Status != models.DeliveryFailed || ds[1].Attempts != outbox.MaxAttempts ||
		!strings.Contains(ds[1].LastError, "answered 503") {
		t.Fatalf("deliveries: %+v", ds)
	}
	if k := again.AuditKinds(); k["delivery.failed"] != 1 || k["delivery.retrying"] < outbox.MaxAttempts-1 {
		t.Fatalf("audited: %v", k)
	}

	// Deliveries that ended are kept for KeepDeliveries, then deleted; one
	// still queued is kept whatever its age; the audit log keeps them all.
	rcv.Mu.Lock()
	rcv.Failures = 1000
	rcv.Mu.Unlock()
	queued := again.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if n, err := again.Out.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("pruned %d young deliveries: %v", n, err)
	}
	ended := 0
	for _, d := range ds {
		if d.Status != models.DeliveryQueued {
			ended++
		}
	}
	again.Clock.Add(outbox.KeepDeliveries + time.Hour)
	if n, err := again.Out.Prune(context.Background()); err != nil || n != int64(ended) || ended < 2 {
		t.Fatalf("pruned %d of the %d that ended: %v", n, ended, err)
	}
	left, _ := again.Store.DeliveriesAbout(context.Background(), out.CallID)
	if len(left) != len(ds)-ended {
		t.Fatalf("left after pruning: %+v", left)
	}
	for _, d := range left {
		if d.Status != models.DeliveryQueued {
			t.Fatalf("an ended delivery was kept: %+v", d)
		}
	}
	if ds, _ := again.Store.DeliveriesAbout(context.Background(), queued.CallID); len(ds) != 1 || ds[0].Status != models.DeliveryQueued {
		t.Fatalf("the queued delivery: %+v", ds)
	}
	if k := again.AuditKinds(); k["delivery.failed"] != 1 {
		t.Fatalf("the audit log lost attempts: %v", k)
	}
}

// A pending action unanswered for EscalateAfter is marked overdue once, and
// supervisors hear of it; approvers are reminded before it expires; once it
// expires, the receiver hears that too. The clock is the test's.
func TestEscalationFollowsTheClock(t *testing.T) {
	rcv := &outboxtest.Receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	var changed []string
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{EscalateAfter: 15 * time.Minute, RemindBefore: 10 * time.Minute,
		Changed: func(id string) { changed = append(changed, id) }}, hooks(t, "s", srv.URL))
	ctx := context.Background()
	out := e.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	escalate := func() (int, int) {
		t.Helper()
		o, r, err := e.Out.Escalate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return o, r
	}
	e.Clock.Add(14 * time.Minute)
	if o, r := escalate(); o+r != 0 {
		t.Fatalf("escalated early: %d %d", o, r)
	}
	e.Clock.Add(2 * time.Minute)
	if o, _ := escalate(); o != 1 {
		t.Fatalf("overdue: %d", o)
	}
	if o, _ := escalate(); o != 0 {
		t.Fatal("marked overdue twice")
	}
	if c, _ := e.Store.ToolCall(ctx, out.CallID); c.OverdueAt == nil || len(changed) != 1 {
		t.Fatalf("not marked: %+v %v", c.OverdueAt, changed)
	}
	e.Clock.Add(24*time.Hour - 16*time.Minute - 11*time.Minute) // 11 minutes before it expires
	if _, r := escalate(); r != 0 {
		t.Fatal("reminded too early")
	}
	e.Clock.Add(2 * time.Minute)
	if _, r := escalate(); r != 1 {
		t.Fatal("no reminder")
	}
	e.Clock.Add(10 * time.Minute)
	if n, err := e.Gate.ExpireOverdueActions(ctx); err != nil || n != 1 {
		t.Fatalf("expired %d: %v", n, err)
	}
	for range 4 { // one at a time: a receiver hears of an action in order
		e.Deliver()
	}
	var types []string
	for _, r := range rcv.All() {
		types = append(types, r.Event)
	}
	if strings.Join(types, " ") != "action.pending action.overdue action.reminder action.decided" {
		t.Fatalf("events: %v", types)
	}
	var expired outbox.Event
	_ = json.Unmarshal(rcv.All()[3].Body, &expired)
	if expired.Action.Status != "expired" || expired.Action.Outcome == "" {
		t.Fatalf("expiry event: %s", rcv.All()[3].Body)
	}
}

// Nothing is queued when nobody is to be told, and two channels of one
// name are refused (each channel refuses its own bad configuration: see
// channels/*).
func TestOutboxConfiguration(t *testing.T) {
	store := storetest.Open(t)
	one := hooks(t, "s", "https://x.example/h")(store)
	if _, err := outbox.New(store, outbox.Config{Channels: []outbox.Channel{one, one}}); err == nil || !strings.Contains(err.Error(), "two channels") {
		t.Errorf("two webhook channels: %v", err)
	}
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{})
	e.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if ds, _ := e.Store.Deliveries(context.Background(), 10); len(ds) != 0 {
		t.Fatalf("queued with nobody to tell: %+v", ds)
	}
}
