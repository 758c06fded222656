package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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

// pendingError is a queued statement's failure: that statement was never
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
				first = &pendingError{fmt.Errorf("%s: %w", q.wrap, err)}
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
			}
		}
		if err := br.Close(); err != nil && first == nil {
			first = err
		}
		return first
	})
	clear(pending)
	return affected, err
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
