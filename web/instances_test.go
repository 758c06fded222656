package web_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web"
)

// twoInstances opens two stores on one new PostgreSQL database, as two
// instances would, with the demo shop seeded.
func twoInstances(t *testing.T) (*storage.Store, *storage.Store) {
	t.Helper()
	dsn := storetest.DSN(t)
	open := func() *storage.Store {
		s, err := storage.Open(dsn, storage.Options{Own: shop.Schema})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	if _, err := shop.On(a).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// Two instances on one PostgreSQL database: a queue page open on one shows,
// live, an action that became pending through the other, and its approval
// on the other.
func TestInstancesShareTheQueueLive(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	storeA, storeB := twoInstances(t)
	a, b := demoAppOn(t, storeA, nil, false), demoAppOn(t, storeB, nil, false)
	a.staff(models.Approver, "ann@x.test", "Ann")
	browser := b.signIn("ann@x.test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/queue/events", nil)
	res, err := browser.client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("queue stream on B: %v %v", res, err)
	}
	defer res.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	until := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("the stream ended before %s", what)
				}
				if ok(l) {
					return
				}
			case <-deadline:
				t.Fatalf("B's queue stream never showed %s", what)
			}
		}
	}
	call := a.pendingRefund("it arrived broken") // on A
	until("the action pending on A", func(l string) bool { return strings.Contains(l, call.ID) })
	if err := a.gate.Reject(context.Background(), call.ID, models.Actor{ID: "stf_x", Name: "Ann", Role: models.Approver}, "not this time"); err != nil {
		t.Fatal(err)
	}
	until("the action gone after A rejected it", func(l string) bool {
		return strings.HasPrefix(l, "data:") && !strings.Contains(l, call.ID)
	})
}

// A customer's run stream open on one instance shows what happens to the
// run on another: the approval made there, the reply and the new status.
func TestInstancesShareRunStreams(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	storeA, storeB := twoInstances(t)
	a, b := demoAppOn(t, storeA, nil, false), demoAppOn(t, storeB, nil, false)
	r := a.do("POST", "/api/v1/runs", "", `{"message":"refund $900 on order A1002 because it arrived broken","customer_token":"`+token(t, secret, "cus_alice", "Alice", time.Hour)+`"}`)
	if r.Status != 201 || runStatus(r) != "paused" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	id, rt := r.Body["run"].(map[string]any)["id"].(string), r.Body["run_token"].(string)
	s := b.stream(id, rt, "") // on B
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "paused" })
	calls, _ := a.store.RunCalls(context.Background(), id)
	if _, err := a.gate.Approve(context.Background(), calls[0].ID, models.Actor{ID: "stf_1", Name: "Ann", Role: models.Approver}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	ev := s.until(t, func(ev event) bool { return ev.Name == "turn" && ev.Data["role"] == "assistant" })
	if !strings.Contains(ev.Data["text"].(string), "Done: I refunded $900.00 on order A1002") {
		t.Fatalf("the reply on B's stream: %+v", ev)
	}
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "waiting" })
}

// A standing grant given on one instance is used by calls on both, never
// past its count however they interleave, and a revocation on one stops
// it on the other at once.
func TestInstancesShareStandingGrants(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	storeA, storeB := twoInstances(t)
	a, b := demoAppOn(t, storeA, nil, false), demoAppOn(t, storeB, nil, false)
	for _, x := range []*app{a, b} {
		x.gate.Limits = gate.Limits{MaxPendingPerRun: 100, MaxPendingPerCustomer: 100}
	}
	sue := models.Actor{ID: "stf_sue", Name: "Sue", Role: models.Supervisor}
	first := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":100,"reason":"dented"}`)
	if first.Status != models.CallPending {
		t.Fatalf("first refund: %+v", first)
	}
	res, err := a.gate.Approve(context.Background(), first.CallID, sue, gate.ApproveRequest{Grant: &gate.GrantRequest{Uses: 5, For: time.Hour}})
	if err != nil || res.Grant == nil {
		t.Fatalf("approve with a grant on A: %+v %v", res, err)
	}
	// 12 refunds of $60 at once, half on each instance (with the first
	// they stay under the demo's $1,000 two-person line).
	outs := make(chan gate.Outcome, 12)
	var wg sync.WaitGroup
	for i := range 12 {
		x := []*app{a, b}[i%2]
		run := x.run("cus_bob", "Bob")
		wg.Go(func() {
			out, err := x.gate.Call(context.Background(), gate.CallRequest{RunID: run, CustomerID: "cus_bob", Channel: "test", Tool: "issue_refund",
				Args: []byte(`{"order_id":"B2001","amount":60,"reason":"dented"}`)})
			if err != nil {
				t.Error(err)
			}
			outs <- out
		})
	}
	wg.Wait()
	close(outs)
	granted := 0
	for out := range outs {
		if out.Decision.Rule == gate.GrantRule+res.Grant.ID {
			granted++
		}
	}
	if granted != 5 {
		t.Fatalf("%d calls on two instances used a grant of 5", granted)
	}
	res2 := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":60,"reason":"x"}`)
	second, err := a.gate.Approve(context.Background(), res2.CallID, sue, gate.ApproveRequest{Grant: &gate.GrantRequest{Uses: 5, For: time.Hour}})
	if err != nil || second.Grant == nil {
		t.Fatalf("a second grant: %+v %v", second, err)
	}
	if _, err := b.gate.RevokeGrant(context.Background(), second.Grant.ID, sue, "wrong customer"); err != nil {
		t.Fatal(err)
	}
	if out := a.refund(a.run("cus_bob", "Bob"), "cus_bob", `{"order_id":"B2001","amount":60,"reason":"y"}`); out.Status != models.CallPending {
		t.Fatalf("a call on A after B revoked the grant: %+v", out)
	}
}

// Sign-in limits are the service's, not each instance's: wrong passwords
// for one account from one address, sent to two instances in turn, are
// refused after the same number as on one.
func TestInstancesShareSignInLimits(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	storeA, storeB := twoInstances(t)
	trust := func(c *web.Config) { c.TrustProxy = true }
	a, b := demoAppOn(t, storeA, trust, false), demoAppOn(t, storeB, trust, false)
	a.staff(models.Approver, "ann@x.test", "Ann")
	tries := []*browser{a.browser(), b.browser()}
	refusedAt := 0
	for i := 1; i <= 8 && refusedAt == 0; i++ {
		res := tries[i%2].postFrom("198.51.100.9", "/login", url.Values{"email": {"ann@x.test"}, "password": {"wrong password!"}})
		if res.StatusCode == http.StatusTooManyRequests {
			refusedAt = i
		}
	}
	// One instance allows 5 at once per address and account; two together
	// must not allow 10.
	if refusedAt != 6 {
		t.Fatalf("the first refusal came at attempt %d across two instances, want 6", refusedAt)
	}
	// Ann from her own address is not locked out.
	if res := tries[0].postFrom("192.0.2.7", "/login", url.Values{"email": {"ann@x.test"}, "password": {password}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("Ann's own sign-in: %d", res.StatusCode)
	}
}
