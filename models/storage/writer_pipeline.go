package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL the writer sends what a unit writes without waiting for
// each answer: a statement whose result the unit does not need (Tx.send)
// is queued and goes, with everything queued before it, in one round trip
// with the next statement that must be answered (a read, a change whose
// count decides, the savepoints, COMMIT). BEGIN is queued too, so it goes
// with the chain head's lock. A batch of any size then costs a handful of
// round trips: BEGIN with the head, each unit's reads, the rest with
// COMMIT. On SQLite, in the same process, there is no round trip to save:
// Tx.send runs at once.

// queued is a statement waiting for the next round trip; wrap names it in
// an error.
type queued struct {
	query, wrap string
	args        []any
}

// pendingError is a queued statement the database refused: it was never
// committed, nor anything after it in its transaction.
type pendingError struct{ err error }

func (e *pendingError) Error() string { return e.err.Error() }
func (e *pendingError) Unwrap() error { return e.err }

// send runs a statement whose result the unit does not need: queued on
// PostgreSQL (its error comes with the next round trip, and at the latest
// with COMMIT), run at once on SQLite. wrap names it in an error.
func (tx *Tx) send(wrap, query string, args ...any) error {
	if !tx.d.pg {
		if _, err := tx.w.exec(query, args); err != nil {
			return fmt.Errorf("%s: %w", wrap, err)
		}
		return nil
	}
	tx.w.pending = append(tx.w.pending, queued{query: query, wrap: wrap, args: args})
	return nil
}

// flush sends what is queued (PostgreSQL), in one round trip.
func (w *writer) flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	_, err := w.pgBatch(nil)
	return err
}

// pgBatch sends the queued statements and then last (when set) in one
// round trip, and returns last's count of rows; scan, when given, takes
// last's one row instead (sql.ErrNoRows: none). A queued statement's
// failure is a *pendingError.
func (w *writer) pgBatch(last *queued, scan ...any) (affected int64, err error) {
	pending := w.pending
	w.pending = w.pending[:0]
	if len(pending) > 0 && pending[0].query == "BEGIN" {
		w.began = true
	}
	err = w.conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		b := &pgx.Batch{}
		for _, q := range pending {
			if err := queue(b, w.store.d, q); err != nil {
				return err
			}
		}
		if last != nil {
			if err := queue(b, w.store.d, *last); err != nil {
				return err
			}
		}
		br := pc.SendBatch(context.Background(), b)
		var first error
		for _, q := range pending {
			if _, err := br.Exec(); err != nil && first == nil {
				first = fmt.Errorf("%s: %w", q.wrap, err)
				var refused *pgconn.PgError
				if errors.As(err, &refused) {
					// The database refused it, so the transaction ends
					// without committing. A lost connection is not that:
					// with COMMIT sent, it may have committed.
					first = &pendingError{first}
				}
			}
		}
		if last != nil && first == nil {
			if len(scan) > 0 {
				first = br.QueryRow().Scan(scan...)
				if errors.Is(first, pgx.ErrNoRows) {
					first = sql.ErrNoRows
				}
			} else {
				tag, err := br.Exec()
				affected, first = tag.RowsAffected(), err
				if err == nil && last.query == "COMMIT" && tag.String() == "ROLLBACK" {
					// What PostgreSQL answers a COMMIT of a failed
					// transaction (pgx's Tx.Commit says the same).
					first = &pendingError{pgx.ErrTxCommitRollback}
				}
			}
		}
		if err := br.Close(); err != nil && first == nil {
			first = err
		}
		return first
	})
	clear(pending)
	if err == nil && last != nil && strings.HasPrefix(last.query, "ROLLBACK TO SAVEPOINT") {
		w.aborted = nil
	}
	return affected, w.failed(err)
}

// failed notes a statement's failure in the writer's transaction on
// PostgreSQL, which ignores what follows until the transaction ends or
// goes back to a savepoint: COMMIT would then roll back quietly, so it is
// refused with the first failure instead, even one a unit did not return.
func (w *writer) failed(err error) error {
	var refused *pgconn.PgError
	if w.aborted == nil && errors.As(err, &refused) {
		w.aborted = err
	}
	return err
}

// queue adds q to b, its arguments as the driver would take them.
func queue(b *pgx.Batch, d dialect, q queued) error {
	args := make([]any, len(q.args))
	for i, a := range q.args {
		v, err := driverValue(a)
		if err != nil {
			return fmt.Errorf("%s: argument %d: %w", q.wrap, i+1, err)
		}
		args[i] = v
	}
	b.Queue(d.rebind(q.query), args...)
	return nil
}
