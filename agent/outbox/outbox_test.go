package outbox_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	t     testing.TB
	store *storage.Store
	gate  *gate.Gate
	clock *clock
	out   *outbox.Outbox
}

// newEnv is the demo shop's gate on a store of its own, with an outbox
// configured by cfg, installed, and a clock the test controls.
func newEnv(t testing.TB, dsn string, cfg outbox.Config) *env {
	t.Helper()
	if dsn == "" {
		dsn = storetest.DSN(t)
	}
	store, err := storage.Open(dsn, storage.Options{Own: shop.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	store.Now = clk.Now
	ctx := context.Background()
	if _, err := shop.On(store).Seed(ctx); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(shop.Tools(store)...)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(shop.PolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol})
	t.Cleanup(g.Close)
	if cfg.Link == nil {
		cfg.Link = func(id string) string { return "https://cs.example/actions/" + id }
	}
	out, err := outbox.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Attach(g.Tools, nil, g.AsksPasskeyOf)
	out.Install()
	return &env{t: t, store: store, gate: g, clock: clk, out: out}
}

// refund asks for a refund in a new run of the customer's.
func (e *env) refund(customer, name, args string) gate.Outcome {
	e.t.Helper()
	run := models.NewID("run")
	ctx := context.Background()
	if err := e.store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: customer, CustomerName: name, Channel: "test", Status: models.RunActive})
	}); err != nil {
		e.t.Fatal(err)
	}
	out, err := e.gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: customer, CustomerName: name, Channel: "test",
		Tool: "issue_refund", Args: []byte(args)})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) deliver() {
	e.t.Helper()
	if err := e.out.DeliverDue(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) staff(role models.StaffRole, email, name string) *models.Staff {
	e.t.Helper()
	st := &models.Staff{ID: models.NewID("stf"), Email: email, Name: name, Role: role}
	if err := e.store.CreateStaff(context.Background(), st, "test"); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// auditKinds counts the audit events of each kind.
func (e *env) auditKinds() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	err := e.store.EachAuditEvent(context.Background(), func(ev *models.AuditEvent) error {
		out[string(ev.Kind)]++
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// receiver is a webhook receiver that fails the first `failures` requests.
type receiver struct {
	mu       sync.Mutex
	failures int
	got      []received
}

type received struct {
	body            []byte
	sig, event, dlv string
	status          int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	status := http.StatusOK
	if r.failures > 0 {
		r.failures--
		status = http.StatusServiceUnavailable
	}
	r.got = append(r.got, received{body: body, sig: req.Header.Get("X-Countersign-Signature"),
		event: req.Header.Get("X-Countersign-Event"), dlv: req.Header.Get("X-Countersign-Delivery"), status: status})
	w.WriteHeader(status)
	_, _ = w.Write([]byte("busy"))
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// verify checks a signature the way the README tells receivers to.
func verify(secret string, body []byte, header string) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	return ts != "" && hmac.Equal([]byte(want), []byte(sig))
}

// A webhook receives a signed event for an action that waits; a receiver
// that fails is tried again after the backoff (and not before), and every
// attempt is audited; the decision and the finished call follow in order.
func TestWebhookEventsAreSignedAndRetried(t *testing.T) {
	rcv := &receiver{failures: 2}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	const secret = "whsec-test"
	e := newEnv(t, "", outbox.Config{Webhooks: []string{srv.URL + "/hooks/countersign?token=abc"}, WebhookSecret: secret})
	out := e.refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if out.Status != models.CallPending {
		t.Fatalf("refund: %s", out.Status)
	}
	e.deliver()
	if got := rcv.all(); len(got) != 1 || got[0].status != 503 {
		t.Fatalf("first attempt: %+v", got)
	}
	e.deliver() // not due yet: the backoff is 10 s
	if n := len(rcv.all()); n != 1 {
		t.Fatalf("tried again before the backoff: %d attempts", n)
	}
	e.clock.Add(outbox.Backoff(1) + time.Second)
	e.deliver()
	e.clock.Add(outbox.Backoff(2) + time.Second)
	e.deliver()
	got := rcv.all()
	if len(got) != 3 || got[2].status != 200 {
		t.Fatalf("attempts: %d", len(got))
	}
	last := got[2]
	if !verify(secret, last.body, last.sig) || verify("other", last.body, last.sig) {
		t.Fatalf("signature %q does not verify", last.sig)
	}
	if string(got[0].body) != string(last.body) || got[0].dlv != last.dlv {
		t.Fatal("a retry is not the same delivery")
	}
	var ev outbox.Event
	if err := json.Unmarshal(last.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "action.pending" || last.event != "action.pending" || ev.Action == nil || ev.Action.ID != out.CallID ||
		ev.Action.Summary != "Refund $100.00 on order A1001" || ev.Action.URL != "https://cs.example/actions/"+out.CallID ||
		ev.Action.RequiredApprovals != 1 || ev.Action.Status != "pending" || !strings.HasPrefix(ev.ID, "evt_") {
		t.Fatalf("event: %s", last.body)
	}
	// Every field a receiver reads is the call's as recorded.
	rec, err := e.store.ToolCall(context.Background(), out.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Action.CustomerID != "cus_alice" || ev.Action.RunID != rec.RunID || ev.Action.Rule != rec.Rule || ev.Action.Reason != rec.Reason ||
		ev.Action.ExpiresAt == nil || !ev.Action.ExpiresAt.Equal(*rec.ExpiresAt) || string(ev.Action.Args) != rec.Args {
		t.Fatalf("event %s\nfor the call %+v", last.body, rec)
	}
	kinds := e.auditKinds()
	if kinds["delivery.retrying"] != 2 || kinds["delivery.delivered"] != 1 {
		t.Fatalf("attempts audited: %v", kinds)
	}
	ds, _ := e.store.DeliveriesAbout(context.Background(), out.CallID)
	if len(ds) != 1 || ds[0].Status != models.DeliveryDelivered || ds[0].Attempts != 3 ||
		ds[0].Target != srv.URL+"/hooks/countersign" || strings.Contains(ds[0].Target, "token") {
		t.Fatalf("the delivery: %+v", ds)
	}

	// The decision and the call's end reach the receiver in that order.
	ann := e.staff(models.Approver, "ann@example.com", "Ann")
	if _, err := e.gate.Approve(context.Background(), out.CallID, ann.Actor(), gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	e.deliver()
	e.deliver()
	got = rcv.all()
	if len(got) != 5 || got[3].event != "action.decided" || got[4].event != "call.finished" {
		t.Fatalf("after the approval: %d deliveries", len(got))
	}
	var decided, finished outbox.Event
	_ = json.Unmarshal(got[3].body, &decided)
	_ = json.Unmarshal(got[4].body, &finished)
	if decided.Action.Status != "approved" || decided.Actor != ann.Actor().String() || finished.Call == nil ||
		finished.Call.Status != "succeeded" || !finished.Call.Action {
		t.Fatalf("decided %s\nfinished %s", got[3].body, got[4].body)
	}
}

// Deliveries are stored with the change: made while nothing sends them
// (the server stopped before it could), they go out after a restart. A
// receiver that keeps failing is given up after the last attempt.
func TestDeliveriesSurviveARestart(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	dsn := storetest.DSN(t)
	cfg := outbox.Config{Webhooks: []string{srv.URL}, WebhookSecret: "s"}
	first := newEnv(t, dsn, cfg)
	out := first.refund("cus_bob", "Bob", `{"order_id":"B2001","amount":1200}`)
	if out.Status != models.CallPending {
		t.Fatalf("refund: %s", out.Status)
	}
	first.store.Close()
	if n := len(rcv.all()); n != 0 {
		t.Fatalf("%d sent before the restart", n)
	}
	again := newEnv(t, dsn, cfg)
	again.deliver()
	got := rcv.all()
	if len(got) != 1 || got[0].event != "action.pending" || !strings.Contains(string(got[0].body), out.CallID) {
		t.Fatalf("after the restart: %+v", got)
	}

	// A receiver that never answers 2xx: MaxAttempts, then given up.
	rcv.mu.Lock()
	rcv.failures = 1000
	rcv.mu.Unlock()
	for _, st := range []*models.Staff{again.staff(models.Supervisor, "sue@example.com", "Sue"), again.staff(models.Approver, "ann@example.com", "Ann")} {
		if _, err := again.gate.Approve(context.Background(), out.CallID, st.Actor(), gate.ApproveRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < outbox.MaxAttempts+2; i++ {
		again.deliver()
		again.clock.Add(time.Hour + time.Minute)
	}
	ds, _ := again.store.DeliveriesAbout(context.Background(), out.CallID)
	if len(ds) != 3 || ds[1].Event != "action.decided" || ds[1].Status != models.DeliveryFailed || ds[1].Attempts != outbox.MaxAttempts ||
		!strings.Contains(ds[1].LastError, "answered 503") {
		t.Fatalf("deliveries: %+v", ds)
	}
	if k := again.auditKinds(); k["delivery.failed"] != 1 || k["delivery.retrying"] < outbox.MaxAttempts-1 {
		t.Fatalf("audited: %v", k)
	}

	// Deliveries that ended are kept for KeepDeliveries, then deleted; one
	// still queued is kept whatever its age; the audit log keeps them all.
	rcv.mu.Lock()
	rcv.failures = 1000
	rcv.mu.Unlock()
	queued := again.refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if n, err := again.out.Prune(context.Background()); err != nil || n != 0 {
		t.Fatalf("pruned %d young deliveries: %v", n, err)
	}
	ended := 0
	for _, d := range ds {
		if d.Status != models.DeliveryQueued {
			ended++
		}
	}
	again.clock.Add(outbox.KeepDeliveries + time.Hour)
	if n, err := again.out.Prune(context.Background()); err != nil || n != int64(ended) || ended < 2 {
		t.Fatalf("pruned %d of the %d that ended: %v", n, ended, err)
	}
	left, _ := again.store.DeliveriesAbout(context.Background(), out.CallID)
	if len(left) != len(ds)-ended {
		t.Fatalf("left after pruning: %+v", left)
	}
	for _, d := range left {
		if d.Status != models.DeliveryQueued {
			t.Fatalf("an ended delivery was kept: %+v", d)
		}
	}
	if ds, _ := again.store.DeliveriesAbout(context.Background(), queued.CallID); len(ds) != 1 || ds[0].Status != models.DeliveryQueued {
		t.Fatalf("the queued delivery: %+v", ds)
	}
	if k := again.auditKinds(); k["delivery.failed"] != 1 {
		t.Fatalf("the audit log lost attempts: %v", k)
	}
}

// A pending action unanswered for EscalateAfter is marked overdue once, and
// supervisors hear of it; approvers are reminded before it expires; once it
// expires, the receiver hears that too. The clock is the test's.
func TestEscalationFollowsTheClock(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	var changed []string
	e := newEnv(t, "", outbox.Config{Webhooks: []string{srv.URL}, WebhookSecret: "s",
		EscalateAfter: 15 * time.Minute, RemindBefore: 10 * time.Minute, Changed: func(id string) { changed = append(changed, id) }})
	ctx := context.Background()
	out := e.refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	escalate := func() (int, int) {
		t.Helper()
		o, r, err := e.out.Escalate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return o, r
	}
	e.clock.Add(14 * time.Minute)
	if o, r := escalate(); o+r != 0 {
		t.Fatalf("escalated early: %d %d", o, r)
	}
	e.clock.Add(2 * time.Minute)
	if o, _ := escalate(); o != 1 {
		t.Fatalf("overdue: %d", o)
	}
	if o, _ := escalate(); o != 0 {
		t.Fatal("marked overdue twice")
	}
	if c, _ := e.store.ToolCall(ctx, out.CallID); c.OverdueAt == nil || len(changed) != 1 {
		t.Fatalf("not marked: %+v %v", c.OverdueAt, changed)
	}
	e.clock.Add(24*time.Hour - 16*time.Minute - 11*time.Minute) // 11 minutes before it expires
	if _, r := escalate(); r != 0 {
		t.Fatal("reminded too early")
	}
	e.clock.Add(2 * time.Minute)
	if _, r := escalate(); r != 1 {
		t.Fatal("no reminder")
	}
	e.clock.Add(10 * time.Minute)
	if n, err := e.gate.ExpireOverdueActions(ctx); err != nil || n != 1 {
		t.Fatalf("expired %d: %v", n, err)
	}
	for range 4 { // one at a time: a receiver hears of an action in order
		e.deliver()
	}
	var types []string
	for _, r := range rcv.all() {
		types = append(types, r.event)
	}
	if strings.Join(types, " ") != "action.pending action.overdue action.reminder action.decided" {
		t.Fatalf("events: %v", types)
	}
	var expired outbox.Event
	_ = json.Unmarshal(rcv.all()[3].body, &expired)
	if expired.Action.Status != "expired" || expired.Action.Outcome == "" {
		t.Fatalf("expiry event: %s", rcv.all()[3].body)
	}
}

// Nothing is queued when nobody is to be told, and a bad configuration is
// refused with what to fix.
func TestOutboxConfiguration(t *testing.T) {
	store := storetest.Open(t)
	for _, c := range []struct {
		cfg  outbox.Config
		want string
	}{
		{outbox.Config{Webhooks: []string{"ftp://x"}, WebhookSecret: "s"}, "not an http(s) URL"},
		{outbox.Config{Webhooks: []string{"https://x.example/h"}}, "--webhook-secret"},
		{outbox.Config{SlackToken: "xoxb-1"}, "--slack-channel"},
		{outbox.Config{SMTPURL: "smtp://mail.example", MailFrom: ""}, "--mail-from"},
		{outbox.Config{SMTPURL: "http://mail.example", MailFrom: "a@b.c"}, "smtp://"},
	} {
		if _, err := outbox.New(store, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	e := newEnv(t, "", outbox.Config{})
	e.refund("cus_alice", "Alice", `{"order_id":"A1001","amount":100}`)
	if ds, _ := e.store.Deliveries(context.Background(), 10); len(ds) != 0 {
		t.Fatalf("queued with nobody to tell: %+v", ds)
	}
}
