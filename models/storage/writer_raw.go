package storage

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"time"

	"gorm.io/gorm"
)

// The writer's statements, run on its driver connection inside the
// writer's open transaction there, prepared once and kept.

type rawStatement struct {
	query    string
	args     []any
	named    []driver.NamedValue
	query1   bool                       // a query returning at most one row
	row      []driver.Value             // its values
	each     func([]driver.Value) error // a query's every row (queryRows)
	affected int64
}

// writeTx is the writer's open transaction, for gorm and for its end.
type writeTx interface {
	gorm.ConnPool
	Commit() error
	Rollback() error
}

// begin opens the writer's transaction on its connection, sending BEGIN
// (BEGIN IMMEDIATE on SQLite, see sqliteDSN) and COMMIT itself: on
// PostgreSQL they go with the statements beside them (writer_pipeline.go);
// on SQLite database/sql would start a goroutine for every transaction and
// wake it at the end, and on a virtual machine those wake-ups are a large
// part of a small write.
func (w *writer) begin() (writeTx, error) {
	if w.store.d.pg {
		clear(w.pending)
		w.pending, w.began, w.aborted = append(w.pending[:0], queued{query: "BEGIN", wrap: "begin transaction"}), false, nil
		return connTx{w.conn, w}, nil
	}
	if _, err := w.exec("BEGIN IMMEDIATE", nil); err != nil {
		return nil, err
	}
	return connTx{w.conn, w}, nil
}

// connTx is a transaction the writer began on its connection. It offers
// gorm the connection but not a way to begin another transaction on it:
// gorm then runs inside this one, as it does inside a *sql.Tx. What the
// writer queued goes first.
type connTx struct {
	c *sql.Conn
	w *writer
}

func (t connTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := t.w.flush(); err != nil {
		return nil, err
	}
	return t.c.PrepareContext(ctx, query)
}

func (t connTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.w.flush(); err != nil {
		return nil, err
	}
	res, err := t.c.ExecContext(ctx, query, args...)
	return res, t.w.failed(err)
}

func (t connTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.w.flush(); err != nil {
		return nil, err
	}
	rows, err := t.c.QueryContext(ctx, query, args...)
	return rows, t.w.failed(err)
}

// QueryRowContext cannot say a queued statement failed: the query then
// fails with the aborted transaction, and the failure itself comes with
// COMMIT.
func (t connTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	_ = t.w.flush()
	return t.c.QueryRowContext(ctx, query, args...)
}

// Commit ends the transaction; on PostgreSQL, with what is queued, in one
// round trip (a queued statement's failure is a *pendingError: nothing was
// committed).
func (t connTx) Commit() error {
	if t.w.store.d.pg {
		if err := t.w.aborted; err != nil {
			return err // a statement failed that the unit did not hear of
		}
		_, err := t.w.pgBatch(&queued{query: "COMMIT", wrap: "commit"})
		if err == nil {
			t.w.began = false
		} // else Rollback ends what is left of it
		return err
	}
	_, err := t.w.exec("COMMIT", nil)
	return err
}

// Rollback ends the transaction. After a failed COMMIT it may have ended
// already: SQLite then says there is none to roll back, which the writer,
// like database/sql's ErrTxDone, does not count. On PostgreSQL what is
// queued is dropped, and a BEGIN never sent needs no ROLLBACK.
func (t connTx) Rollback() error {
	w := t.w
	if w.store.d.pg {
		clear(w.pending)
		w.pending = w.pending[:0]
		if !w.began {
			return nil
		}
		w.began = false
	}
	_, err := w.exec("ROLLBACK", nil)
	return err
}

// exec runs one statement on the writer's driver connection, inside the
// writer's transaction on that same connection.
func (w *writer) exec(query string, args []any) (int64, error) {
	if w.store.d.pg {
		return w.pgBatch(&queued{query: query, wrap: query, args: args})
	}
	w.cur.query, w.cur.args, w.cur.query1 = query, args, false
	err := w.conn.Raw(w.rawRun)
	n := w.cur.affected
	w.cur.args, w.cur.affected = nil, 0
	return n, err
}

func (w *writer) queryRow(query string, args []any) ([]driver.Value, error) {
	if err := w.flush(); err != nil {
		return nil, err
	}
	w.cur.query, w.cur.args, w.cur.query1 = query, args, true
	err := w.conn.Raw(w.rawRun)
	row := w.cur.row
	w.cur.args, w.cur.row = nil, nil
	if err != nil {
		return nil, w.failed(err)
	}
	if row == nil {
		return nil, sql.ErrNoRows
	}
	return row, nil
}

// queryRows runs a query on the writer's connection, as queryRow does,
// and hands fn each row's values (its own to keep).
func (w *writer) queryRows(query string, args []any, fn func([]driver.Value) error) error {
	if err := w.flush(); err != nil {
		return err
	}
	w.cur.query, w.cur.args, w.cur.query1, w.cur.each = query, args, true, fn
	err := w.conn.Raw(w.rawRun)
	w.cur.args, w.cur.row, w.cur.each = nil, nil, nil
	return w.failed(err)
}

func (w *writer) runRaw(dc any) error {
	ctx := context.Background()
	st, cached := w.stmts[w.cur.query]
	if !cached {
		var err error
		st, err = dc.(driver.ConnPrepareContext).PrepareContext(ctx, w.store.d.rebind(w.cur.query))
		if err != nil {
			return err
		}
		if len(w.stmts) < maxPrepared {
			w.stmts[w.cur.query] = st
		} else {
			defer st.Close()
		}
	}
	named := w.cur.named[:0]
	for i, a := range w.cur.args {
		v, err := driverValue(a)
		if err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
		named = append(named, driver.NamedValue{Ordinal: i + 1, Value: v})
	}
	w.cur.named = named
	defer clear(named) // let go of the values
	if !w.cur.query1 {
		res, err := st.(driver.StmtExecContext).ExecContext(ctx, named)
		if err != nil {
			return err
		}
		w.cur.affected, err = res.RowsAffected()
		return err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, named)
	if err != nil {
		return err
	}
	defer rows.Close()
	for {
		row := make([]driver.Value, len(rows.Columns()))
		switch err := rows.Next(row); {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		for i, v := range row {
			if b, ok := v.([]byte); ok { // the driver may reuse its buffer
				row[i] = bytes.Clone(b)
			}
		}
		if w.cur.each == nil {
			w.cur.row = row
			return nil
		}
		if err := w.cur.each(row); err != nil {
			return err
		}
	}
}

// driverValue converts an argument the way database/sql would.
func driverValue(v any) (driver.Value, error) {
	switch x := v.(type) {
	case nil, string, int64, float64, bool, []byte, time.Time:
		return x, nil
	case int:
		return int64(x), nil
	case *time.Time:
		if x == nil {
			return nil, nil
		}
		return *x, nil
	}
	return driver.DefaultParameterConverter.ConvertValue(v)
}

func (w *writer) closeStatements() {
	w.conn.Raw(func(any) error {
		for _, st := range w.stmts {
			st.Close()
		}
		return nil
	})
	w.conn.Close()
}
