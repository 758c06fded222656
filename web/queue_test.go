package web_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

func (a *app) run(customerID, name string) string {
	a.t.Helper()
	id := models.NewID("run")
	err := a.store.Write(context.Background(), func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: id, CustomerID: customerID, CustomerName: name, Channel: "test", Status: models.RunPaused})
	})
	if err != nil {
		a.t.Fatal(err)
	}
	return id
}

func (a *app) refund(run, customerID, args string) gate.Outcome {
	a.t.Helper()
	out, err := a.gate.Call(context.Background(), gate.CallRequest{RunID: run, CustomerID: customerID, Channel: "test", Tool: "issue_refund", Args: []byte(args)})
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

// Sixty actions must not bury a real one: the queue says how many wait,
// pages through all of them oldest first, and filters by tool, customer
// and amount.
func TestQueueCountsPagesAndFilters(t *testing.T) {
	a := newApp(t)
	a.gate.Limits = gate.Limits{MaxPendingPerRun: 100, MaxPendingPerCustomer: 100}
	a.staff(models.Approver, "ann@x.test", "Ann")
	bob := a.run("cus_bob", "Bob")
	for i := 0; i < 60; i++ {
		if out := a.refund(bob, "cus_bob", fmt.Sprintf(`{"order_id":"B2001","amount":%d}`, 60+i)); out.Status != models.CallPending {
			t.Fatalf("refund %d: %+v", i, out)
		}
	}
	alice := a.refund(a.run("cus_alice", "Alice"), "cus_alice", `{"order_id":"A1002","amount":900}`)
	b := a.signIn("ann@x.test")

	_, page := b.get("/queue")
	if n := strings.Count(page, `data-testid="queue-row"`); n != 50 || !strings.Contains(page, "1–50 of 61 waiting") {
		t.Fatalf("first page: %d rows; count %q", n, between(page, `data-testid="queue-count">`, "</p>"))
	}
	if strings.Contains(page, alice.CallID) || !strings.Contains(page, `href="/queue?page=2"`) {
		t.Fatal("the newest action should be on page 2, with a link to it")
	}
	_, page = b.get("/queue?page=2")
	if n := strings.Count(page, `data-testid="queue-row"`); n != 11 || !strings.Contains(page, alice.CallID) || !strings.Contains(page, "51–61 of 61") {
		t.Fatalf("second page: %d rows", n)
	}
	for _, tc := range []struct {
		query string
		rows  int
	}{
		{"customer=Alice", 1},
		{"customer=cus_bob", 50},
		{"tool=issue_refund&min_amount=900", 1},
		{"min_amount=100&max_amount=109", 10},
		{"tool=cancel_order", 0},
	} {
		_, page := b.get("/queue?" + tc.query)
		if n := strings.Count(page, `data-testid="queue-row"`); n != tc.rows {
			t.Errorf("%s: %d rows, want %d (%s)", tc.query, n, tc.rows, between(page, `data-testid="queue-count">`, "</p>"))
		}
	}
	_, page = b.get("/queue?" + url.Values{"min_amount": {"lots"}}.Encode())
	if !strings.Contains(page, "is not a number of dollars") || strings.Count(page, `data-testid="queue-row"`) != 50 {
		t.Fatal("a bad amount should be said, and left out of the filter")
	}
	if !strings.Contains(page, "issue_refund (61)") {
		t.Fatal("the tool filter should count the waiting actions of each tool")
	}
}

// The runs list says what each conversation is about, in words.
func TestRunsListShowsTheFirstMessage(t *testing.T) {
	a := newApp(t)
	a.staff(models.Auditor, "aud@x.test", "Audrey")
	a.pendingRefund("it arrived <broken>")
	_, page := a.signIn("aud@x.test").get("/runs")
	link := between(page, `data-testid="run-link">`, "</a>")
	if !strings.Contains(link, "refund $900 on order A1002 because it arrived &lt;broken&gt;") {
		t.Fatalf("the run's link reads %q", link)
	}
}
