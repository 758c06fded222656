package storage_test

import (
	"context"
	"errors"
	"fmt"
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
	var wg sync.WaitGroup
	errs := make([][]error, callers)
	for c := range callers {
		errs[c] = make([]error, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("run_w%02d_%02d", c, i)
				errs[c][i] = s.Write(ctx, func(tx *storage.Tx) error {
					if err := tx.CreateRun(&models.Run{ID: id, Status: "active"}); err != nil {
						return err
					}
					if i%10 == 3 {
						return errors.New("refused")
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
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
