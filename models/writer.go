package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Tx is one unit of work handed to Store.Write. Everything done through it
// commits together with its audit events, or not at all.
type Tx struct {
	db    *gorm.DB // gorm on the same transaction, for queries off the hot path
	sql   *sql.Tx
	w     *writer
	chain chainState
	now   time.Time
}

// Now is the time of this unit of work, in UTC, at microsecond precision
// (what every database we target can store exactly).
func (tx *Tx) Now() time.Time { return tx.now }

// exec runs a statement through the writer's cache of prepared statements:
// the hot path (recording calls and audit events) skips gorm's reflection
// and SQLite's parser.
func (tx *Tx) exec(query string, args ...any) (sql.Result, error) {
	if stmt := tx.w.prepared(query); stmt != nil {
		return tx.sql.Stmt(stmt).Exec(args...)
	}
	return tx.sql.Exec(query, args...)
}

// queryRow is exec for a query that returns one row.
func (tx *Tx) queryRow(query string, args ...any) *sql.Row {
	if stmt := tx.w.prepared(query); stmt != nil {
		return tx.sql.Stmt(stmt).QueryRow(args...)
	}
	return tx.sql.QueryRow(query, args...)
}

type writeReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error
}

// writer owns every write transaction. Callers hand it units of work; it
// commits whatever has queued up in one transaction (group commit), each
// unit inside its own savepoint so that one unit's failure rolls back only
// that unit. With SQLite there is a single writer anyway: queueing in Go
// instead of on the file lock is what turns many small commits into few.
type writer struct {
	store    *Store
	conn     *sql.DB // one connection: the writer's prepared statements live on it
	reqs     chan *writeReq
	maxBatch int
	quit     chan struct{}
	stopped  chan struct{}
	once     sync.Once
	// Prepared statements, only touched by the writer goroutine. A statement
	// can only be prepared on the connection while no transaction holds it,
	// so a new query runs unprepared once and is prepared after the commit.
	stmts     map[string]*sql.Stmt
	toPrepare map[string]bool
}

// maxPrepared bounds the statement cache.
const maxPrepared = 200

func newWriter(s *Store, conn *sql.DB, maxBatch int) *writer {
	if maxBatch <= 0 {
		maxBatch = 256
	}
	w := &writer{
		store:     s,
		conn:      conn,
		reqs:      make(chan *writeReq),
		maxBatch:  maxBatch,
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
		stmts:     map[string]*sql.Stmt{},
		toPrepare: map[string]bool{},
	}
	go w.loop()
	return w
}

func (w *writer) prepared(query string) *sql.Stmt {
	if s, ok := w.stmts[query]; ok {
		return s
	}
	if len(w.stmts)+len(w.toPrepare) < maxPrepared {
		w.toPrepare[query] = true
	}
	return nil
}

// prepareNew prepares the statements first seen in the last transaction,
// now that the connection is free.
func (w *writer) prepareNew() {
	for q := range w.toPrepare {
		if s, err := w.conn.Prepare(q); err == nil {
			w.stmts[q] = s
		}
		delete(w.toPrepare, q)
	}
}

// Write runs fn in a write transaction and returns once that transaction has
// committed (nil) or fn's work was rolled back (the error). fn must not call
// Write itself, and may run more than once (when another unit of its batch
// fails, the batch is replayed): it must only assign to what it captures,
// never accumulate.
func (s *Store) Write(ctx context.Context, fn func(*Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.writer.reqs <- r:
	case <-s.writer.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over, the unit will run or be refused promptly; wait for
	// the truth rather than reporting a cancellation that did not happen.
	return <-r.done
}

func (w *writer) loop() {
	defer close(w.stopped)
	defer func() {
		for _, s := range w.stmts {
			s.Close()
		}
	}()
	for {
		select {
		case r := <-w.reqs:
			batch := []*writeReq{r}
		gather:
			for len(batch) < w.maxBatch {
				select {
				case r := <-w.reqs:
					batch = append(batch, r)
				default:
					break gather
				}
			}
			w.run(batch)
			w.prepareNew()
		case <-w.quit:
			return
		}
	}
}

func (w *writer) close() {
	w.once.Do(func() { close(w.quit) })
	<-w.stopped
}

func (w *writer) run(batch []*writeReq) {
	results := make([]error, len(batch))
	for i, r := range batch {
		results[i] = r.ctx.Err() // a caller that gave up before its turn is skipped
	}
	// First try the whole batch without savepoints: units rarely fail, and
	// two statements fewer per unit is a large part of a unit's cost. If one
	// fails, the transaction is rolled back and the batch runs again with a
	// savepoint around each unit, so the failure stays that unit's alone.
	err := w.attempt(batch, results, false)
	if errors.Is(err, errRetryWithSavepoints) {
		for i, r := range batch {
			results[i] = r.ctx.Err()
		}
		err = w.attempt(batch, results, true)
	}
	for i, r := range batch {
		if results[i] == nil {
			results[i] = err
		}
		r.done <- results[i]
	}
}

var errRetryWithSavepoints = errors.New("a unit failed: retry the batch with savepoints")

// attempt runs the batch in one transaction. Without savepoints, the first
// failing unit aborts the attempt (unless it is the only unit).
func (w *writer) attempt(batch []*writeReq, results []error, savepoints bool) error {
	stx, err := w.conn.Begin() // BEGIN IMMEDIATE, see sqliteDSN
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	gtx := w.store.wdb.Session(&gorm.Session{NewDB: true})
	gtx.Statement.ConnPool = stx
	tx := &Tx{db: gtx, sql: stx, w: w}
	abort := func(err error) error {
		stx.Rollback()
		return err
	}
	ran := 0
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		tx.now = w.store.now().Truncate(time.Microsecond)
		if !savepoints {
			if err := callUnit(r.fn, tx); err != nil {
				results[i] = err
				if len(batch) == 1 {
					return abort(nil)
				}
				return abort(errRetryWithSavepoints)
			}
			ran++
			continue
		}
		if _, err := tx.exec("SAVEPOINT unit"); err != nil {
			return abort(fmt.Errorf("savepoint: %w", err))
		}
		saved := tx.chain
		if err := callUnit(r.fn, tx); err != nil {
			results[i] = err
			tx.chain = saved
			if _, rbErr := tx.exec("ROLLBACK TO SAVEPOINT unit"); rbErr != nil {
				// The transaction is in an unknown state: give up on all of it.
				return abort(fmt.Errorf("roll back unit: %w", rbErr))
			}
		} else {
			ran++
		}
		if _, err := tx.exec("RELEASE SAVEPOINT unit"); err != nil {
			return abort(fmt.Errorf("release savepoint: %w", err))
		}
	}
	if ran == 0 {
		return abort(nil)
	}
	if err := tx.saveChainHead(); err != nil {
		return abort(err)
	}
	if err := stx.Commit(); err != nil {
		return abort(fmt.Errorf("commit: %w", err))
	}
	return nil
}

func callUnit(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write unit panicked: %v", p)
		}
	}()
	return fn(tx)
}
