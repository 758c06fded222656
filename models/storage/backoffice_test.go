package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
)

// The audit list names everyone who gave a verdict on a call, in the order
// they gave it.
func TestAuditRowsListVerdictsInOrder(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "audit.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clock := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s.Now = func() time.Time { return clock }
	ctx := context.Background()
	write := func(fn func(*Tx) error) {
		t.Helper()
		if err := s.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(tx *Tx) error {
		if err := tx.CreateRun(&models.Run{ID: "run_1", Status: "active", CustomerName: "Bob"}); err != nil {
			return err
		}
		return tx.CreateToolCall(&models.ToolCall{ID: "call_1", RunID: "run_1", Tool: "issue_refund", Status: models.CallPending})
	})
	// Zed approves first, Amy second: the list follows time, not names.
	for _, name := range []string{"Zed", "Amy"} {
		clock = clock.Add(time.Minute)
		write(func(tx *Tx) error {
			return tx.CreateApproval(&models.Approval{ToolCallID: "call_1", StaffID: "stf_" + name, StaffName: name, Verdict: "approve"})
		})
	}
	rows, err := s.AuditCalls(ctx, models.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].DecidedBy != "Zed (approve), Amy (approve)" || rows[0].CustomerName != "Bob" {
		t.Fatalf("got %+v", rows)
	}
}
