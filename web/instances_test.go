package web_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storetest"
)

// Two instances on one PostgreSQL database: a queue page open on one shows,
// live, an action that became pending through the other, and its approval
// on the other.
func TestInstancesShareTheQueueLive(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	dsn := storetest.DSN(t)
	open := func() *models.Store {
		s, err := models.Open(dsn, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	storeA, storeB := open(), open()
	if _, err := storeA.SeedDemoShop(context.Background()); err != nil {
		t.Fatal(err)
	}
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
	dsn := storetest.DSN(t)
	storeA, err := models.Open(dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	storeB, err := models.Open(dsn, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storeA.SeedDemoShop(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, b := demoAppOn(t, storeA, nil, false), demoAppOn(t, storeB, nil, false)
	r := a.do("POST", "/api/v1/runs", "", `{"message":"refund $900 on order A1002 because it arrived broken","customer_token":"`+token(t, secret, "cus_alice", "Alice", time.Hour)+`"}`)
	if r.Status != 201 || runStatus(r) != "paused" {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	id, rt := r.Body["run"].(map[string]any)["id"].(string), r.Body["run_token"].(string)
	s := b.stream(id, rt, "") // on B
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "paused" })
	calls, _ := a.store.RunCalls(context.Background(), id)
	if _, err := a.gate.Approve(context.Background(), calls[0].ID, models.Actor{ID: "stf_1", Name: "Ann", Role: models.Approver}, agent.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	ev := s.until(t, func(ev event) bool { return ev.Name == "turn" && ev.Data["role"] == "assistant" })
	if !strings.Contains(ev.Data["text"].(string), "Done: I refunded $900.00 on order A1002") {
		t.Fatalf("the reply on B's stream: %+v", ev)
	}
	s.until(t, func(ev event) bool { return ev.Name == "status" && ev.Data["status"] == "waiting" })
}
