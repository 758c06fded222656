package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// A unit runs on its caller's goroutine when the writer is idle, and in
// the writer's group commit when it is not: under load many units still
// share a commit, a failing unit is undone alone either way, and every
// unit that was told it committed is there.
func TestUnitsShareCommitsUnderLoadAndFailAlone(t *testing.T) {
	s := storetest.Open(t)
	ctx := context.Background()
	before := s.WriterStats()
	const callers, each = 16, 30
	errs := writeAtOnce(s, callers, each, func(c, i int, tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: fmt.Sprintf("run_w%02d_%02d", c, i), Status: "active"}); err != nil {
			return err
		}
		if i%10 == 3 {
			return errors.New("refused")
		}
		return nil
	})
	ok := 0
	for c := range callers {
		for i := range each {
			id := fmt.Sprintf("run_w%02d_%02d", c, i)
			_, err := s.Run(ctx, id)
			if i%10 == 3 {
				if errs[c][i] == nil || err == nil {
					t.Fatalf("%s: the failing unit reported %v and its run is there: %v", id, errs[c][i], err)
				}
				continue
			}
			if errs[c][i] != nil || err != nil {
				t.Fatalf("%s: write %v, read %v", id, errs[c][i], err)
			}
			ok++
		}
	}
	after := s.WriterStats()
	units, commits := after.Units-before.Units, after.Commits-before.Commits
	if units != int64(ok) {
		t.Fatalf("%d units committed, %d expected", units, ok)
	}
	if commits >= units {
		t.Fatalf("%d commits for %d units from %d callers at once: no group commit", commits, units, callers)
	}
}

// writeAtOnce has that many callers write each units at once, unit i of
// caller c doing unit(c, i, tx), and returns what each write returned.
func writeAtOnce(s *storage.Store, callers, each int, unit func(c, i int, tx *storage.Tx) error) [][]error {
	var wg sync.WaitGroup
	errs := make([][]error, callers)
	for c := range callers {
		errs[c] = make([]error, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				errs[c][i] = s.Write(context.Background(), func(tx *storage.Tx) error { return unit(c, i, tx) })
			}
		}()
	}
	wg.Wait()
	return errs
}

// A write after Close is refused, whether or not the writer was idle.
func TestAWriteAfterCloseIsRefused(t *testing.T) {
	s, err := storage.Open(storetest.DSN(t), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Write(ctx, func(tx *storage.Tx) error { return tx.CreateRun(&models.Run{ID: "run_before", Status: "active"}) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ran := false
	err = s.Write(ctx, func(tx *storage.Tx) error { ran = true; return nil })
	if !errors.Is(err, models.ErrClosed) || ran {
		t.Fatalf("a write after Close: %v, ran %v", err, ran)
	}
}

// What a unit asks to be done before its batch commits (BeforeCommit) runs
// after every unit of the batch, in the same commit; a hook that fails is
// undone alone with the hooks it added, and the hooks of a unit that fails
// are never run. A hook runs at its unit's time. A unit alone in its
// transaction is told so (Batched).
func TestHooksBeforeCommitRunOnceTheBatchRanAndFailAlone(t *testing.T) {
	s := storetest.Open(t)
	ctx := context.Background()
	var alone bool
	if err := s.Write(ctx, func(tx *storage.Tx) error { alone = !tx.Batched(); return nil }); err != nil || !alone {
		t.Fatalf("a unit on an idle writer: %v, told it shares its transaction: %v", err, !alone)
	}
	const callers, each = 16, 30
	var batched, early sync.Map
	errs := writeAtOnce(s, callers, each, func(c, i int, tx *storage.Tx) error {
		id := fmt.Sprintf("run_h%02d_%02d", c, i)
		if err := tx.CreateRun(&models.Run{ID: id, Status: "active"}); err != nil {
			return err
		}
		if tx.Batched() {
			batched.Store(id, true)
		}
		unitNow := tx.Now()
		tx.BeforeCommit(func(tx *storage.Tx) error {
			if !tx.Now().Equal(unitNow) {
				early.Store(id+" (at another unit's time)", true)
			}
			if _, err := s.Run(ctx, id); err == nil {
				early.Store(id, true) // (a read sees only what is committed)
			}
			if err := tx.CreateRun(&models.Run{ID: id + "_hook", Status: "active"}); err != nil {
				return err
			}
			tx.BeforeCommit(func(tx *storage.Tx) error { // a hook's own hook
				return tx.CreateRun(&models.Run{ID: id + "_late", Status: "active"})
			})
			if i%10 == 5 {
				return errors.New("the hook fails")
			}
			return nil
		})
		if i%10 == 3 {
			return errors.New("refused")
		}
		return nil
	})
	n := 0
	batched.Range(func(any, any) bool { n++; return true })
	if n == 0 {
		t.Fatal("no unit of 16 callers at once shared its transaction")
	}
	early.Range(func(k, _ any) bool {
		t.Fatalf("%s: its unit was committed before its hook ran, or the hook ran at another time", k)
		return false
	})
	for c := range callers {
		for i := range each {
			id := fmt.Sprintf("run_h%02d_%02d", c, i)
			_, unit := s.Run(ctx, id)
			_, hook := s.Run(ctx, id+"_hook")
			if _, late := s.Run(ctx, id+"_late"); (late == nil) != (hook == nil) {
				t.Fatalf("%s: its hook's run %v, and the hook's own hook's %v", id, hook, late)
			}
			switch {
			case i%10 == 3:
				if errs[c][i] == nil || unit == nil || hook == nil {
					t.Fatalf("%s failed: told %v; its run %v, its hook's %v", id, errs[c][i], unit, hook)
				}
			case i%10 == 5:
				if errs[c][i] != nil || unit != nil || hook == nil {
					t.Fatalf("%s, whose hook failed: told %v; its run %v, its hook's %v", id, errs[c][i], unit, hook)
				}
			default:
				if errs[c][i] != nil || unit != nil || hook != nil {
					t.Fatalf("%s: told %v; its run %v, its hook's %v", id, errs[c][i], unit, hook)
				}
			}
		}
	}
}

// What a unit sends without waiting for its answer (on PostgreSQL, queued
// for the next round trip) still fails that unit alone: a tool call whose
// id is taken is refused only by the database, with the whole unit undone,
// under load and alone, and every other unit commits.
func TestAStatementRefusedLaterStillFailsItsUnitAlone(t *testing.T) {
	s := storetest.Open(t)
	ctx := context.Background()
	runWithCall(t, s, "run_first", "call_taken")
	err := s.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: "run_alone", Status: "active"}); err != nil {
			return err
		}
		return recordCall(tx, "call_taken", "run_alone")
	})
	if err == nil || !strings.Contains(err.Error(), "record tool call") {
		t.Fatalf("a lone unit inserting a taken id: %v", err)
	}
	if _, err := s.Run(ctx, "run_alone"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("the refused unit's run was kept: %v", err)
	}
	const callers, each = 12, 20
	errs := writeAtOnce(s, callers, each, func(c, i int, tx *storage.Tx) error {
		run := fmt.Sprintf("run_p%02d_%02d", c, i)
		if err := tx.CreateRun(&models.Run{ID: run, Status: "active"}); err != nil {
			return err
		}
		id := "call_" + run
		if i%7 == 2 {
			id = "call_taken"
		}
		if err := recordCall(tx, id, run); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "test", Kind: "test.wrote", Subject: id})
	})
	for c := range callers {
		for i := range each {
			run := fmt.Sprintf("run_p%02d_%02d", c, i)
			_, err := s.Run(ctx, run)
			if i%7 == 2 {
				if errs[c][i] == nil || !strings.Contains(errs[c][i].Error(), "record tool call") || !errors.Is(err, models.ErrNotFound) {
					t.Fatalf("%s: the unit with a taken id reported %v; its run: %v", run, errs[c][i], err)
				}
				continue
			}
			if errs[c][i] != nil || err != nil {
				t.Fatalf("%s: write %v, read %v", run, errs[c][i], err)
			}
		}
	}
	if rep, err := s.VerifyAuditChain(ctx); err != nil || !rep.OK {
		t.Fatalf("the chain after refused units: %+v %v", rep, err)
	}
}

// A unit that goes on past a statement the database refused, without
// returning the error, is never reported committed unless it was: on
// PostgreSQL the refusal ends the transaction, and the write says so.
func TestAUnitThatIgnoresARefusalIsNotToldItCommitted(t *testing.T) {
	s := storetest.Open(t)
	ctx := context.Background()
	runWithCall(t, s, "run_one", "call_one")
	err := s.Write(ctx, func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: "run_two", Status: "active"}); err != nil {
			return err
		}
		_ = recordCall(tx, "call_one", "run_two") // taken: refused, now or later
		_, _ = tx.ToolCall("call_one")            // a read after it, its error ignored too
		return nil
	})
	_, readErr := s.Run(ctx, "run_two")
	if (err == nil) != (readErr == nil) {
		t.Fatalf("the write said %v, and the run it made reads %v", err, readErr)
	}
	if rep, err := s.VerifyAuditChain(ctx); err != nil || !rep.OK {
		t.Fatalf("the chain: %+v %v", rep, err)
	}
}

// recordCall records a finished call of run with the id given.
func recordCall(tx *storage.Tx, id, run string) error {
	return tx.CreateToolCall(&models.ToolCall{ID: id, RunID: run, Tool: "t", Risk: "read", Args: "{}", RawArgs: "{}",
		Status: models.CallSucceeded, Decision: models.DecidedAllow})
}

// runWithCall commits a run with one call of it.
func runWithCall(t *testing.T, s *storage.Store, run, call string) {
	t.Helper()
	if err := s.Write(context.Background(), func(tx *storage.Tx) error {
		if err := tx.CreateRun(&models.Run{ID: run, Status: "active"}); err != nil {
			return err
		}
		return recordCall(tx, call, run)
	}); err != nil {
		t.Fatal(err)
	}
}
