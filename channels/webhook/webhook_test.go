package webhook_test

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

// A bad configuration is refused with what to fix; none is no channel.
func TestWebhookConfiguration(t *testing.T) {
	for _, c := range []struct {
		cfg  webhook.Config
		want string
	}{
		{webhook.Config{URLs: []string{"ftp://x"}, Secret: "s"}, "not an http(s) URL"},
		{webhook.Config{URLs: []string{"https://user:pw@x.example/h?token=abc", "x"}, Secret: "s"}, `"(a URL that does not parse)"`},
		{webhook.Config{URLs: []string{"https://x.example/h"}}, "--webhook-secret"},
		{webhook.Config{URLs: []string{"https://x.example/h"}, Secret: "s", Events: []string{"action.nope"}}, "no event type"},
	} {
		if _, err := webhook.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pw") {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if ch, err := webhook.New(webhook.Config{}); ch != nil || err != nil {
		t.Errorf("no URL: %v %v", ch, err)
	}
}

// A webhook receives a signed event for an action that waits; a receiver
// that fails is tried again after the backoff (and not before), and every
// attempt is audited; the decision and the finished call follow in order.
func TestWebhookEventsAreSignedAndRetried(t *testing.T) {
	rcv := &outboxtest.Receiver{Failures: 2}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	const secret = "whsec-test"
	e := outboxtest.New(t, "", demo.Shop, outbox.Config{}, hooks(t, secret, srv.URL+"/hooks/countersign?token=abc"))
	out := e.Refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if out.Status != models.CallPending {
		t.Fatalf("refund: %s", out.Status)
	}
	e.Deliver()
	if got := rcv.All(); len(got) != 1 || got[0].Status != 503 {
		t.Fatalf("first attempt: %+v", got)
	}
	e.Deliver() // not due yet: the backoff is 10 s
	if n := len(rcv.All()); n != 1 {
		t.Fatalf("tried again before the backoff: %d attempts", n)
	}
	e.Clock.Add(outbox.Backoff(1) + time.Second)
	e.Deliver()
	e.Clock.Add(outbox.Backoff(2) + time.Second)
	e.Deliver()
	got := rcv.All()
	if len(got) != 3 || got[2].Status != 200 {
		t.Fatalf("attempts: %d", len(got))
	}
	last := got[2]
	if !outboxtest.Verify(secret, last.Body, last.Sig) || outboxtest.Verify("other", last.Body, last.Sig) {
		t.Fatalf("signature %q does not verify", last.Sig)
	}
	if string(got[0].Body) != string(last.Body) || got[0].Delivery != last.Delivery {
		t.Fatal("a retry is not the same delivery")
	}
	var ev outbox.Event
	if err := json.Unmarshal(last.Body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "action.pending" || last.Event != "action.pending" || ev.Action == nil || ev.Action.ID != out.CallID ||
		ev.Action.Summary != "Refund $100.00 on order A1001" || ev.Action.URL != "https://cs.example/actions/"+out.CallID ||
		ev.Action.RequiredApprovals != 1 || ev.Action.Status != "pending" || !strings.HasPrefix(ev.ID, "evt_") {
		t.Fatalf("event: %s", last.Body)
	}
	// Every field a receiver reads is the call's as recorded.
	rec, err := e.Store.ToolCall(context.Background(), out.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Action.CustomerID != "cus_alice" || ev.Action.RunID != rec.RunID || ev.Action.Rule != rec.Rule || ev.Action.Reason != rec.Reason ||
		ev.Action.ExpiresAt == nil || !ev.Action.ExpiresAt.Equal(*rec.ExpiresAt) || string(ev.Action.Args) != rec.Args {
		t.Fatalf("event %s\nfor the call %+v", last.Body, rec)
	}
	kinds := e.AuditKinds()
	if kinds["delivery.retrying"] != 2 || kinds["delivery.delivered"] != 1 {
		t.Fatalf("attempts audited: %v", kinds)
	}
	ds, _ := e.Store.DeliveriesAbout(context.Background(), out.CallID)
	if len(ds) != 1 || ds[0].Status != models.DeliveryDelivered || ds[0].Attempts != 3 ||
		ds[0].Target != srv.URL+"/hooks/countersign" || strings.Contains(ds[0].Target, "token") {
		t.Fatalf("the delivery: %+v", ds)
	}

	// The decision and the call's end reach the receiver in that order.
	ann := e.Staff(models.Approver, "ann@example.com", "Ann")
	if _, err := e.Gate.Approve(context.Background(), out.CallID, ann.Actor(), gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	e.Deliver()
	e.Deliver()
	got = rcv.All()
	if len(got) != 5 || got[3].Event != "action.decided" || got[4].Event != "call.finished" {
		t.Fatalf("after the approval: %d deliveries", len(got))
	}
	var decided, finished outbox.Event
	_ = json.Unmarshal(got[3].Body, &decided)
	_ = json.Unmarshal(got[4].Body, &finished)
	if decided.Action.Status != "approved" || decided.Actor != ann.Actor().String() || finished.Call == nil ||
		finished.Call.Status != "succeeded" || !finished.Call.Action {
		t.Fatalf("decided %s\nfinished %s", got[3].Body, got[4].Body)
	}
}
