package storage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

func openStore(t testing.TB) (*storage.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.db")
	s, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func appendEvents(t testing.TB, s *storage.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		err := s.Write(context.Background(), func(tx *storage.Tx) error {
			return tx.Audit(models.Event{Actor: "test", Kind: "test.event", Subject: fmt.Sprintf("s%d", i), Payload: models.RunClosedPayload{Reason: fmt.Sprintf("<b>x</b> %d", i)}})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// tamper changes the database behind the application's back, as an
// attacker with file access would.
func tamper(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestAuditChainDetectsTampering(t *testing.T) {
	cases := []struct {
		name    string
		stmts   []string
		wantSeq int64
	}{
		{"untouched", nil, 0},
		{"payload changed", []string{`UPDATE audit_events SET payload = '{"i":99}' WHERE seq = 4`}, 4},
		{"actor changed", []string{`UPDATE audit_events SET actor = 'someone else' WHERE seq = 2`}, 2},
		{"time changed", []string{`UPDATE audit_events SET at = '2020-01-01 00:00:00+00:00' WHERE seq = 5`}, 5},
		{"row deleted", []string{`DELETE FROM audit_events WHERE seq = 3`}, 3},
		{"rows swapped", []string{
			`UPDATE audit_events SET seq = 100 WHERE seq = 2`,
			`UPDATE audit_events SET seq = 2 WHERE seq = 3`,
			`UPDATE audit_events SET seq = 3 WHERE seq = 100`}, 2},
		{"row rehashed alone", []string{`UPDATE audit_events SET payload = '{}', hash = 'ab' WHERE seq = 4`}, 4},
		{"newest rows deleted", []string{`DELETE FROM audit_events WHERE seq >= 5`}, 5},
		{"first row deleted", []string{`DELETE FROM audit_events WHERE seq = 1`}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, path := openStore(t)
			appendEvents(t, s, 6)
			tamper(t, path, c.stmts...)
			rep, err := s.VerifyAuditChain(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if c.wantSeq == 0 {
				if !rep.OK || rep.Events != 6 {
					t.Fatalf("intact chain reported %+v", rep)
				}
				return
			}
			if rep.OK || rep.BadSeq != c.wantSeq {
				t.Fatalf("got %+v, want the break at %d", rep, c.wantSeq)
			}
		})
	}
}

func TestFailedUnitRollsBackAloneInABatch(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, 40)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = s.Write(ctx, func(tx *storage.Tx) error {
				if err := tx.Audit(models.Event{Actor: "test", Kind: "unit", Subject: fmt.Sprint(i)}); err != nil {
					return err
				}
				if i%4 == 0 {
					return errBoom // after writing: the savepoint must undo it
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	for i, err := range results {
		if (i%4 == 0) != errors.Is(err, errBoom) {
			t.Fatalf("unit %d: %v", i, err)
		}
	}
	rep, err := s.VerifyAuditChain(ctx)
	if err != nil || !rep.OK || rep.Events != 30 {
		t.Fatalf("chain after mixed batch: %+v %v", rep, err)
	}
}

func TestWriteAfterCloseIsRefused(t *testing.T) {
	s, err := storage.Open(filepath.Join(t.TempDir(), "x.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := s.Write(context.Background(), func(*storage.Tx) error { return nil }); !errors.Is(err, models.ErrClosed) {
		t.Fatalf("got %v", err)
	}
}

func TestFormatCents(t *testing.T) {
	for c, want := range map[models.Cents]string{0: "$0.00", 5: "$0.05", 90000: "$900.00", 150000: "$1,500.00", 123456789: "$1,234,567.89", -2050: "-$20.50"} {
		if got := c.String(); got != want {
			t.Errorf("%d: got %s want %s", c, got, want)
		}
	}
}

// What a unit tries (Tx.Try) and fails is undone alone, its hooks with it;
// the rest of the unit commits.
func TestATryThatFailsIsUndoneAloneInItsUnit(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	errBoom := errors.New("boom")
	var ran []string
	err := s.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: "run_kept", Status: models.RunActive}); err != nil {
			return err
		}
		if err := tx.Try(func(tx *storage.Tx) error {
			if err := tx.CreateRun(&models.Run{ID: "run_undone", Status: models.RunActive}); err != nil {
				return err
			}
			tx.AfterCommit(func() { ran = append(ran, "undone") })
			return errBoom
		}); !errors.Is(err, errBoom) {
			return fmt.Errorf("the failed try said %v", err)
		}
		return tx.Try(func(tx *storage.Tx) error {
			tx.AfterCommit(func() { ran = append(ran, "tried") })
			return tx.CreateRun(&models.Run{ID: "run_tried", Status: models.RunActive})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"run_kept": true, "run_undone": false, "run_tried": true} {
		if _, err := s.Run(ctx, id); (err == nil) != want {
			t.Errorf("%s: %v", id, err)
		}
	}
	if len(ran) != 1 || ran[0] != "tried" {
		t.Errorf("hooks run: %v", ran)
	}
}
