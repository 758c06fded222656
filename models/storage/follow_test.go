package storage_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// The insights' counts by hour, kept by the audit log's follower, are what
// the calls say: calls recorded in several hours, on two instances (two
// chains) when the database is PostgreSQL, then approved, rejected,
// expired, run, some before the follower read their first event and some
// after; a store opened again takes up where the marks are; making the
// counts again from the calls (Rederive) gives the same.
func TestTheFollowerCountsWhatTheCallsSay(t *testing.T) {
	dsn := storetest.DSN(t)
	first, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stores := []*storage.Store{first}
	if first.Shared() {
		second, err := storage.Open(dsn, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		stores = append(stores, second)
	}
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	var ids []string
	for i := range 24 {
		s := stores[i%len(stores)]
		s.Now = func() time.Time { return base.Add(time.Duration(i) * 10 * time.Minute) }
		decision := []string{models.DecidedAllow, models.DecidedNeedsApproval, models.DecidedDeny}[i%3]
		status := map[string]models.CallStatus{models.DecidedAllow: models.CallSucceeded, models.DecidedNeedsApproval: models.CallPending,
			models.DecidedDeny: models.CallDenied}[decision]
		id := fmt.Sprintf("call_%02d", i)
		record(t, s, &models.ToolCall{ID: id, RunID: "run_" + id, Tool: []string{"refund", "lookup"}[i%2], Rule: fmt.Sprintf("rule_%d", i%4),
			Decision: decision, Status: status})
		ids = append(ids, id)
		if i == 10 {
			follow(t, first)
		}
	}
	// The held calls (every third from the second) go every way a held call goes.
	endings := [][]models.CallStatus{{models.CallApproved, models.CallExecuting, models.CallSucceeded}, {models.CallRejected},
		{models.CallExpired}, {models.CallApproved, models.CallExecuting, models.CallFailed}, {models.CallCancelled}}
	for n, i := 0, 1; i < len(ids)-3; n, i = n+1, i+3 { // call_22 stays pending
		s := stores[n%len(stores)]
		s.Now = time.Now
		from := models.CallPending
		for _, to := range endings[n%len(endings)] {
			change(t, s, ids[i], from, to)
			from = to
		}
		if n == 2 {
			follow(t, stores[len(stores)-1])
		}
	}
	follow(t, first)
	want := countedFromCalls(t, dsn)
	if got := callHours(t, dsn); !maps.Equal(got, want) {
		t.Fatalf("the follower counted\n%v\nthe calls say\n%v", got, want)
	}
	if at, err := first.HoursCountedAt(ctx); err != nil || at.IsZero() || time.Since(at) > time.Minute {
		t.Fatalf("the counts say they are as of %v (%v)", at, err)
	}
	// Opened again, it goes on from its marks: one more change, counted once.
	first.Close()
	if first, err = storage.Open(dsn, storage.Options{}); err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	change(t, first, ids[len(ids)-2], models.CallPending, models.CallRejected) // call_22: held, left pending
	follow(t, first)
	follow(t, first)
	want = countedFromCalls(t, dsn)
	if got := callHours(t, dsn); !maps.Equal(got, want) {
		t.Fatalf("after opening again the follower counted\n%v\nthe calls say\n%v", got, want)
	}
	if err := first.Rederive(ctx); err != nil {
		t.Fatal(err)
	}
	if got := callHours(t, dsn); !maps.Equal(got, want) {
		t.Fatalf("made again from the calls, the counts are\n%v\nthe follower's were\n%v", got, want)
	}
}

func record(t *testing.T, s *storage.Store, c *models.ToolCall) {
	t.Helper()
	kind := map[string]models.EventKind{models.DecidedAllow: models.EventCallAllowed, models.DecidedNeedsApproval: models.EventCallPending,
		models.DecidedDeny: models.EventCallDenied}[c.Decision]
	err := s.Write(context.Background(), func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: c.RunID, Channel: "api", Status: models.RunActive}); err != nil {
			return err
		}
		if err := tx.CreateToolCall(c); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "model", Kind: kind, Subject: c.ID})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func change(t *testing.T, s *storage.Store, id string, from, to models.CallStatus) {
	t.Helper()
	err := s.Write(context.Background(), func(tx *storage.Tx) error {
		if err := tx.ChangeCallStatus(models.CallChange{ID: id, From: []models.CallStatus{from}, To: to}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "staff", Kind: models.EventKind("call." + string(to)), Subject: id})
	})
	if err != nil {
		t.Fatalf("%s %s -> %s: %v", id, from, to, err)
	}
}

func follow(t *testing.T, s *storage.Store) {
	t.Helper()
	if err := s.FollowAll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// callHours is call_hours, its counts that are not 0.
func callHours(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	rows, err := storetest.Raw(t, dsn).Query(`SELECT hour, tool, rule, decision, outcome, n FROM call_hours WHERE n <> 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var h, tool, rule, decision, outcome string
		var n int64
		if err := rows.Scan(&h, &tool, &rule, &decision, &outcome, &n); err != nil {
			t.Fatal(err)
		}
		out[h+" "+tool+" "+rule+" "+decision+" "+outcome] = n
	}
	return out
}

// countedFromCalls is what call_hours should say, from the calls.
func countedFromCalls(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	rows, err := storetest.Raw(t, dsn).Query(`SELECT created_at, tool, rule, decision, status FROM tool_calls`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	var statuses []string
	for rows.Next() {
		var at time.Time
		var tool, rule, decision, status string
		if err := rows.Scan(&at, &tool, &rule, &decision, &status); err != nil {
			t.Fatal(err)
		}
		out[at.UTC().Format(storage.HourFormat)+" "+tool+" "+rule+" "+decision+" "+storage.Outcome(decision, models.CallStatus(status))]++
		statuses = append(statuses, status)
	}
	slices.Sort(statuses)
	if len(slices.Compact(statuses)) < 6 {
		t.Fatalf("the calls did not go every way: %v", statuses)
	}
	return out
}
