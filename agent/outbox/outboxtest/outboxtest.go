// Package outboxtest is the outbox's and its channels' test kit: a
// business's gate (the demo shop's, in the tests) on a store of its own, with an outbox over the channels a
// test gives, installed, and a clock the test moves; and a webhook
// receiver that fails when told to.
package outboxtest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/business"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

// Clock is a time the test moves.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Env is a gate and an outbox on one store.
type Env struct {
	T     testing.TB
	Store *storage.Store
	Gate  *gate.Gate
	Clock *Clock
	Out   *outbox.Outbox
}

// New is business b's gate on a store of its own (dsn "": a new one),
// with an outbox configured by cfg, installed, and a clock the test
// controls. channels, when given, builds the channels over the store.
func New(t testing.TB, dsn string, b business.Business, cfg outbox.Config, channels ...func(*storage.Store) outbox.Channel) *Env {
	t.Helper()
	if dsn == "" {
		dsn = storetest.DSN(t)
	}
	store, err := storage.Open(dsn, storage.Options{Own: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &Clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	store.Now = clk.Now
	ctx := context.Background()
	if _, err := b.Seed(ctx, store); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(b.Tools(store)...)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.LoadPolicy(b.Policy, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol})
	t.Cleanup(g.Close)
	if cfg.Link == nil {
		cfg.Link = func(id string) string { return "https://cs.example/actions/" + id }
	}
	for _, ch := range channels {
		cfg.Channels = append(cfg.Channels, ch(store))
	}
	out, err := outbox.New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Attach(g.Tools, nil, g.AsksPasskeyOf, nil)
	out.Install()
	return &Env{T: t, Store: store, Gate: g, Clock: clk, Out: out}
}

// Refund asks for a refund in a new run of the customer's.
func (e *Env) Refund(customer, name, args string) gate.Outcome {
	e.T.Helper()
	run := models.NewID("run")
	ctx := context.Background()
	if err := e.Store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: run, CustomerID: customer, CustomerName: name, Channel: "test", Status: models.RunActive})
	}); err != nil {
		e.T.Fatal(err)
	}
	out, err := e.Gate.Call(ctx, gate.CallRequest{RunID: run, CustomerID: customer, CustomerName: name, Channel: "test",
		Tool: "issue_refund", Args: []byte(args)})
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// Deliver sends what is due now and waits for the attempts.
func (e *Env) Deliver() {
	e.T.Helper()
	if err := e.Out.DeliverDue(context.Background()); err != nil {
		e.T.Fatal(err)
	}
}

// Staff makes a staff account.
func (e *Env) Staff(role models.StaffRole, email, name string) *models.Staff {
	e.T.Helper()
	st := &models.Staff{ID: models.NewID("stf"), Email: email, Name: name, Role: role}
	if err := e.Store.CreateStaff(context.Background(), st, "test"); err != nil {
		e.T.Fatal(err)
	}
	return st
}

// AuditKinds counts the audit events of each kind.
func (e *Env) AuditKinds() map[string]int {
	e.T.Helper()
	out := map[string]int{}
	err := e.Store.EachAuditEvent(context.Background(), func(ev *models.AuditEvent) error {
		out[string(ev.Kind)]++
		return nil
	})
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// Receiver is a webhook receiver that fails the first Failures requests.
type Receiver struct {
	Mu       sync.Mutex
	Failures int
	got      []Received
}

// Received is one request a Receiver got.
type Received struct {
	Body                 []byte
	Sig, Event, Delivery string
	Status               int
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.Mu.Lock()
	defer r.Mu.Unlock()
	status := http.StatusOK
	if r.Failures > 0 {
		r.Failures--
		status = http.StatusServiceUnavailable
	}
	r.got = append(r.got, Received{Body: body, Sig: req.Header.Get("X-Countersign-Signature"),
		Event: req.Header.Get("X-Countersign-Event"), Delivery: req.Header.Get("X-Countersign-Delivery"), Status: status})
	w.WriteHeader(status)
	_, _ = w.Write([]byte("busy"))
}

// All is every request so far.
func (r *Receiver) All() []Received {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return append([]Received(nil), r.got...)
}

// Verify checks a signature the way the README tells receivers to.
func Verify(secret string, body []byte, header string) bool {
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
