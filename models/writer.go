package models

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Tx is one unit of work handed to Store.Write. Everything done through it
// commits together with its audit events, or not at all.
type Tx struct {
	db    *gorm.DB
	store *Store
	chain chainState
	now   time.Time
}

// Now is the time of this unit of work, in UTC, at microsecond precision
// (what every database we target can store exactly).
func (tx *Tx) Now() time.Time { return tx.now }

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
	reqs     chan *writeReq
	maxBatch int
	quit     chan struct{}
	stopped  chan struct{}
	once     sync.Once
}

func newWriter(s *Store, maxBatch int) *writer {
	if maxBatch <= 0 {
		maxBatch = 256
	}
	w := &writer{
		store:    s,
		reqs:     make(chan *writeReq),
		maxBatch: maxBatch,
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	go w.loop()
	return w
}

// Write runs fn in a write transaction and returns once that transaction has
// committed (nil) or fn's work was rolled back (the error). fn must not call
// Write itself.
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
	reply := func(commitErr error) {
		for i, r := range batch {
			if results[i] == nil {
				results[i] = commitErr
			}
			r.done <- results[i]
		}
	}
	gtx := w.store.db.Begin()
	if gtx.Error != nil {
		reply(fmt.Errorf("begin transaction: %w", gtx.Error))
		return
	}
	tx := &Tx{db: gtx, store: w.store}
	single := len(batch) == 1
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		tx.now = w.store.now().Truncate(time.Microsecond)
		if single {
			if err := callUnit(r.fn, tx); err != nil {
				results[i] = err
				gtx.Rollback()
				reply(nil)
				return
			}
			continue
		}
		if err := gtx.SavePoint("unit").Error; err != nil {
			results[i] = err
			continue
		}
		saved := tx.chain
		if err := callUnit(r.fn, tx); err != nil {
			results[i] = err
			tx.chain = saved
			if rbErr := gtx.RollbackTo("unit").Error; rbErr != nil {
				// The transaction is in an unknown state: give up on all of it.
				gtx.Rollback()
				reply(fmt.Errorf("roll back unit: %w", rbErr))
				return
			}
		}
		if err := gtx.Exec("RELEASE SAVEPOINT unit").Error; err != nil {
			gtx.Rollback()
			reply(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := tx.saveChainHead(); err != nil {
		gtx.Rollback()
		reply(err)
		return
	}
	if err := gtx.Commit().Error; err != nil {
		gtx.Rollback()
		reply(fmt.Errorf("commit: %w", err))
		return
	}
	reply(nil)
}

func callUnit(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("write unit panicked: %v", p)
		}
	}()
	return fn(tx)
}
