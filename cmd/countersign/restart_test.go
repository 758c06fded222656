package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/demo/shop"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web/chat"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

const testSecret = "restart-test-secret-restart-test-secret"

type running struct {
	app    *App
	cancel context.CancelFunc
	done   chan error
}

// boot starts the whole application on port 0 over a database file.
func boot(t *testing.T, db string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := NewApp(ctx, config{Addr: "127.0.0.1:0", DB: db, Demo: true, CustomerSecret: testSecret, Model: "offline"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Listen(); err != nil {
		t.Fatal(err)
	}
	r := &running{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	return r
}

// stop shuts the application down the way a SIGTERM does.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("server did not stop")
	}
	if err := r.app.Close(); err != nil {
		t.Fatal(err)
	}
}

func (r *running) api(t *testing.T, method, path, bearer, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+r.app.Addr()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
	}
	return out
}

func (r *running) waitStatus(t *testing.T, id, rt, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := r.api(t, "GET", "/api/v1/runs/"+id, rt, "")
		run := out["run"].(map[string]any)
		if run["status"] == status {
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run is %s, want %s: %v", run["status"], status, run)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lastAssistantText(run map[string]any) string {
	turns := run["turns"].([]any)
	for i := len(turns) - 1; i >= 0; i-- {
		if tu := turns[i].(map[string]any); tu["role"] == "assistant" {
			return tu["text"].(string)
		}
	}
	return ""
}

func refunds(t *testing.T, db, order string) []shop.Refund {
	t.Helper()
	s, err := storage.Open(db, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, err := shop.On(s).OrderRefunds(context.Background(), order)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestRestartWhilePausedThenApproveRefundsOnce(t *testing.T) {
	db := storetest.DSN(t)
	tok, _ := chat.SignCustomerToken(testSecret, "cus_alice", "Alice", time.Hour)

	first := boot(t, db)
	out := first.api(t, "POST", "/api/v1/runs", "", `{"message":"refund $900 on order A1002 because it arrived broken","customer_token":"`+tok+`"}`)
	run := out["run"].(map[string]any)
	id, rt := run["id"].(string), out["run_token"].(string)
	if run["status"] != "paused" {
		t.Fatalf("run %v", run)
	}
	first.stop(t)

	second := boot(t, db)
	defer second.stop(t)
	second.waitStatus(t, id, rt, "paused")
	calls, err := second.app.store.RunCalls(context.Background(), id)
	if err != nil || len(calls) != 1 || calls[0].Status != models.CallPending {
		t.Fatalf("calls after restart: %+v %v", calls, err)
	}
	if _, err := second.app.gate.Approve(context.Background(), calls[0].ID, models.Actor{ID: "stf_1", Name: "Ann", Role: models.Approver}, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	final := second.waitStatus(t, id, rt, "waiting")
	if got := lastAssistantText(final); !strings.Contains(got, "Done: I refunded $900.00 on order A1002") {
		t.Fatalf("reply %q", got)
	}
	if rs := refunds(t, db, "A1002"); len(rs) != 1 || rs[0].AmountCents != 90000 {
		t.Fatalf("refunds %+v", rs)
	}
}

func TestRestartContinuesARunCaughtBetweenSteps(t *testing.T) {
	db := storetest.DSN(t)
	// A run as a crash leaves it: the model asked for a refund, and the
	// process died before the call reached the gate.
	s, err := storage.Open(db, storage.Options{Own: shop.Schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shop.On(s).Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	runID := models.NewID("run")
	err = s.Write(context.Background(), func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_alice", CustomerName: "Alice", Channel: "api", Status: models.RunActive, TokenHash: models.HashToken("rt_test")}); err != nil {
			return err
		}
		if err := tx.AppendTurn(&models.Turn{RunID: runID, Role: models.RoleCustomer, Text: "refund $20 on A1001"}); err != nil {
			return err
		}
		return tx.AppendTurn(&models.Turn{RunID: runID, Role: models.RoleAssistant,
			Calls: `[{"id":"call_1","tool":"issue_refund","args":{"order_id":"A1001","amount":20}}]`})
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}

	app := boot(t, db)
	run := app.waitStatus(t, runID, "rt_test", "waiting")
	if got := lastAssistantText(run); !strings.Contains(got, "Done: I refunded $20.00 on order A1001") {
		t.Fatalf("reply %q", got)
	}
	turns := len(run["turns"].([]any))
	app.stop(t)

	again := boot(t, db)
	defer again.stop(t)
	run = again.waitStatus(t, runID, "rt_test", "waiting")
	if n := len(run["turns"].([]any)); n != turns {
		t.Fatalf("a second start added turns: %d -> %d", turns, n)
	}
	if rs := refunds(t, db, "A1001"); len(rs) != 1 {
		t.Fatalf("refunds %+v", rs)
	}
}
