package storage

import (
	"errors"
	"fmt"
)

// How a unit of a batch fails alone: savepoints, Try, and what a failed
// COMMIT means for the batch.

// commitFailed is what a failed COMMIT means for the batch. When a queued
// statement failed (PostgreSQL, writer_pipeline.go), nothing was committed:
// a lone unit gets the error; in a batch, whose unit it was is not known
// (shared), so the batch runs again with savepoints; with savepoints every
// unit's statements have answered already, and the statement was the
// batch's own (the chain's head): the batch fails whole. Otherwise whether
// it committed is not known (errCommit).
func (w *writer) commitFailed(err error, batch []*writeReq, results []error, savepoints, shared bool) error {
	var pe *pendingError
	switch {
	case !errors.As(err, &pe):
		return fmt.Errorf("%w: %w", errCommit, err)
	case retryable(err), savepoints:
		return err
	case !shared:
		for i := range batch {
			if results[i] == nil {
				results[i] = err
			}
		}
		return nil
	}
	return errRetryWithSavepoints
}

// Try runs fn in a savepoint of its own inside the unit: when fn fails,
// what it wrote and the hooks it added are undone and the unit goes on
// (fn must not append to the audit chain). It returns fn's error.
func (tx *Tx) Try(fn func(*Tx) error) error {
	if _, err := tx.exec("SAVEPOINT try"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	after, finals, before := len(tx.after), len(tx.finals), len(tx.before)
	err := fn(tx)
	if err == nil {
		err = tx.w.flush() // fn's queued statements answer for it
	}
	if err != nil {
		tx.after, tx.finals, tx.before = tx.after[:after], tx.finals[:finals], tx.before[:before]
		if _, rbErr := tx.exec("ROLLBACK TO SAVEPOINT try"); rbErr != nil {
			return errors.Join(err, fmt.Errorf("roll back: %w", rbErr))
		}
		_, relErr := tx.exec("RELEASE SAVEPOINT try")
		return errors.Join(err, relErr)
	}
	if _, err := tx.exec("RELEASE SAVEPOINT try"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// inSavepoint runs one unit of a batch in a savepoint: a unit that fails is
// undone alone, with the chain links, hooks and moves it added. It returns
// the unit's own error, and an error that ends the whole batch (one worth
// trying again, or a transaction left in an unknown state).
func (tx *Tx) inSavepoint(fn func(*Tx) error) (unitErr, batchErr error) {
	if _, err := tx.exec("SAVEPOINT unit"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	saved, after, moved, finals, before := tx.chain, len(tx.after), len(tx.moved), len(tx.finals), len(tx.before)
	err := callUnit(fn, tx)
	if err == nil {
		err = tx.w.flush() // the unit's queued statements answer for it
	}
	if err != nil {
		if retryable(err) {
			return nil, err // the whole batch again
		}
		unitErr = err
		tx.chain, tx.after, tx.moved, tx.finals, tx.before = saved, tx.after[:after], tx.moved[:moved], tx.finals[:finals], tx.before[:before]
		if _, rbErr := tx.exec("ROLLBACK TO SAVEPOINT unit"); rbErr != nil {
			return unitErr, fmt.Errorf("roll back unit: %w", rbErr)
		}
	}
	if _, err := tx.exec("RELEASE SAVEPOINT unit"); err != nil {
		return unitErr, fmt.Errorf("release savepoint: %w", err)
	}
	return unitErr, nil
}

func callUnit(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write unit panicked: %v", p)
		}
	}()
	return fn(tx)
}
