package storage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// Tx is one unit of work handed to Store.Write. Everything done through it
// commits together with its audit events, or not at all.
type Tx struct {
	db    *gorm.DB // gorm on the same transaction, for queries off the hot path
	w     *writer  // the writer whose transaction this is
	d     dialect
	self  string // the store's instance id (Store.Instance)
	chain chainState
	// calls are the chains of the calls this transaction recorded or read
	// (chains.go).
	calls []callChain
	now   time.Time
	// after is what the units asked to be done once they are committed
	// (AfterCommit), moved the statuses calls entered (for the Observer).
	after []func()
	moved []models.CallStatus
	// finals are the calls that reached a final status in this unit: once
	// committed, the store's Finished hook hears of them (receipts).
	finals []string
	// before is what the units asked to be done once all of them ran
	// (BeforeCommit); batched says whether the batch has more than one.
	before  []beforeCommit
	batched bool
}

// beforeCommit is a hook of BeforeCommit, with its unit's time.
type beforeCommit struct {
	fn  func(*Tx) error
	now time.Time
}

// AfterCommit asks for fn to be called once this unit of work is committed,
// and never if it is not. It runs while the writer's turn is held (on the
// writer's goroutine, or on the caller's when it ran its unit itself), so
// it must be quick and must not write: it is for metrics and notes.
func (tx *Tx) AfterCommit(fn func()) { tx.after = append(tx.after, fn) }

// BeforeCommit asks for fn to be run in this unit's transaction once every
// unit of its batch has run, before it commits, and never if this unit is
// undone. fn runs at the unit's time (Now), in a savepoint of its own
// (Try): its error undoes what it wrote and the hooks it added, and the
// batch goes on. It must not append to the audit chain. It lets a unit
// have work done beside the batch's other units (a signature on another
// goroutine) and keep its result in the same commit.
func (tx *Tx) BeforeCommit(fn func(*Tx) error) {
	tx.before = append(tx.before, beforeCommit{fn: fn, now: tx.now})
}

// Batched says whether other units share this unit's transaction: then
// work done beside the batch (BeforeCommit) overlaps theirs.
func (tx *Tx) Batched() bool { return tx.batched }

// entered notes that a call entered a status in this unit.
func (tx *Tx) entered(id string, status models.CallStatus) {
	tx.moved = append(tx.moved, status)
	if status.Final() {
		tx.finals = append(tx.finals, id)
	}
}

func (tx *Tx) dialect() dialect { return tx.d }

// Serialize makes the units of work that give the same key take turns from
// here to their end, across instances: what one of them decides from what
// it reads (a customer's totals) counts the others' writes. On PostgreSQL it
// is a transaction advisory lock; on SQLite, whose single writer runs one
// unit at a time, there is nothing to do.
func (tx *Tx) Serialize(key string) error {
	if !tx.d.pg {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	if _, err := tx.exec("SELECT pg_advisory_xact_lock(?)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("serialize %s: %w", key, err)
	}
	return nil
}

// Now is the time of this unit of work, in UTC, at microsecond precision
// (what every database we target can store exactly).
func (tx *Tx) Now() time.Time { return tx.now }

// exec runs a statement of the unit of work. It goes straight to the
// driver connection (see writer.exec): the hot path, recording calls and
// audit events, skips gorm's reflection, database/sql's per-statement
// allocations and SQLite's parser.
func (tx *Tx) exec(query string, args ...any) (rowsAffected int64, err error) {
	return tx.w.exec(query, args)
}

// queryRow is exec for a query that returns one row; it returns the row's
// values, or sql.ErrNoRows.
func (tx *Tx) queryRow(query string, args ...any) ([]driver.Value, error) {
	return tx.w.queryRow(query, args)
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
	db       *sql.DB
	conn     *sql.Conn // the one connection of the writer's pool, held for the writer's life (or until lost)
	reqs     chan *writeReq
	maxBatch int
	quit     chan struct{}
	stopped  chan struct{}
	once     sync.Once
	// turn is held while a batch runs: by the writer's goroutine, or by a
	// caller that found nothing running and runs its unit itself (handing
	// a unit to another goroutine and back costs two wake-ups, which on a
	// virtual machine is a large part of a small write). The writer's
	// goroutine takes it for good when it stops.
	turn sync.Mutex

	// Statements prepared on the driver connection, only touched by the
	// writer goroutine (inside conn.Raw).
	stmts map[string]driver.Stmt
	// The statement handed to conn.Raw: kept here rather than captured by a
	// closure so that running one allocates nothing.
	cur    rawStatement
	rawRun func(any) error
	// pending is what waits for the next round trip on PostgreSQL, and
	// began whether this transaction's BEGIN has gone (writer_pipeline.go).
	pending []queued
	began   bool
	// aborted is the first failure in this transaction since its BEGIN
	// or its last savepoint rolled back to: COMMIT is refused with it.
	aborted error

	commits, units atomic.Int64
}

// WriterStats counts the writer's committed transactions and the units of
// work they carried: units per commit is how well group commit is working.
type WriterStats struct {
	Commits int64
	Units   int64
}

// WriterStats reports what the writer has committed since the store opened.
func (s *Store) WriterStats() WriterStats {
	if s.writer == nil {
		return WriterStats{}
	}
	return WriterStats{Commits: s.writer.commits.Load(), Units: s.writer.units.Load()}
}

// maxPrepared bounds the statement cache.
const maxPrepared = 200

func newWriter(s *Store, db *sql.DB, maxBatch int) (*writer, error) {
	if maxBatch <= 0 {
		maxBatch = 256
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		return nil, fmt.Errorf("open the writer's connection: %w", err)
	}
	w := &writer{
		store:    s,
		db:       db,
		conn:     conn,
		reqs:     make(chan *writeReq),
		maxBatch: maxBatch,
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
		stmts:    map[string]driver.Stmt{},
	}
	w.rawRun = w.runRaw
	go w.loop()
	return w, nil
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
	if s.writer.runIdle(r) {
		return <-r.done
	}
	select {
	case s.writer.reqs <- r:
	case <-s.writer.quit:
		return models.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once handed over, the unit will run or be refused promptly; wait for
	// the truth rather than reporting a cancellation that did not happen.
	return <-r.done
}

// runIdle runs r on the caller's goroutine when no batch is running, and
// says whether it did. Under load the writer's goroutine has the turn and
// callers queue for its next batch (group commit) as before.
func (w *writer) runIdle(r *writeReq) bool {
	if !w.turn.TryLock() {
		return false
	}
	defer w.turn.Unlock()
	w.runBatch([]*writeReq{r})
	return true
}

func (w *writer) loop() {
	defer close(w.stopped)
	defer w.closeStatements()
	for {
		select {
		case r := <-w.reqs:
			w.turn.Lock()
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
			w.runBatch(batch)
			w.turn.Unlock()
		case <-w.quit:
			w.turn.Lock() // a caller's unit ends first; nobody runs one after
			return
		}
	}
}

// runBatch runs a batch, then finishes a long log (see walCheckpointer).
func (w *writer) runBatch(batch []*writeReq) {
	w.run(batch)
	if w.store.wal != nil {
		w.store.wal.finish(w.conn)
	}
}

func (w *writer) close() {
	w.once.Do(func() { close(w.quit) })
	<-w.stopped
}

func (w *writer) run(batch []*writeReq) {
	w.runOn(batch, w.store.chain, true)
}

// runOn runs a batch in transactions that append to chain. A unit that
// appended an event about a call of another chain (chains.go) is run again
// once the batch is done, with the others of that chain, in a transaction
// of that chain (mayMove); a unit that appends to two chains fails.
func (w *writer) runOn(batch []*writeReq, chain int64, mayMove bool) {
	results := make([]error, len(batch))
	reset := func() {
		for i, r := range batch {
			var other *otherChainError
			if errors.As(results[i], &other) {
				continue // it runs in its call's chain, after this batch
			}
			results[i] = r.ctx.Err() // a caller that gave up before its turn is skipped
		}
	}
	reset()
	// First try the whole batch without savepoints: units rarely fail, and
	// two statements fewer per unit is a large part of a unit's cost. If one
	// fails, the transaction is rolled back and the batch runs again with a
	// savepoint around each unit, so the failure stays that unit's alone.
	// PostgreSQL may also end a transaction so that another (on another
	// instance) can go on, a deadlock or a serialization failure: then the
	// batch runs again from the start, as a unit's contract allows.
	savepoints := false
	var err error
	for try := 0; ; try++ {
		err = w.attempt(batch, results, savepoints, chain)
		lost := w.connectionLost(err)
		if errors.Is(err, errRetryWithSavepoints) && !savepoints {
			savepoints = true
		} else if errors.Is(err, errRetryWithoutIt) {
			// A unit of another chain was taken out: the rest again, as
			// they were (each time one fewer).
		} else if (retryable(err) || (lost && !errors.Is(err, errCommit))) && try < 8 {
			// Nothing of the batch was committed: run it again.
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
		} else {
			break
		}
		reset()
	}
	var moved map[int64][]*writeReq
	for i, r := range batch {
		if results[i] == nil {
			results[i] = err
		}
		var other *otherChainError
		if mayMove && errors.As(results[i], &other) {
			if moved == nil {
				moved = map[int64][]*writeReq{}
			}
			moved[other.chain] = append(moved[other.chain], r)
			continue
		}
		r.done <- results[i]
	}
	if len(moved) > 0 {
		for _, c := range slices.Sorted(maps.Keys(moved)) {
			w.runOn(moved[c], c, false)
		}
	}
}

var errRetryWithSavepoints = errors.New("a unit failed: retry the batch with savepoints")

// unitFailed is what a unit's failure, in a batch run without savepoints,
// means for the batch: run it all again (retryable), nothing more (the
// unit was alone), again without the unit (another chain's), or again
// with a savepoint around each unit, so that the failure stays its own.
func unitFailed(err error, alone bool) error {
	var other *otherChainError
	switch {
	case retryable(err):
		return err
	case alone:
		return nil
	case errors.As(err, &other):
		return errRetryWithoutIt
	}
	return errRetryWithSavepoints
}

// errRetryWithoutIt: a unit appended about a call of another chain (which
// says nothing about the other units): the batch runs again without it.
var errRetryWithoutIt = errors.New("a unit belongs to another chain: retry the batch without it")

// errCommit marks a failed COMMIT: whether the batch was committed is not
// known, so it is never run again.
var errCommit = errors.New("commit")

// connectionLost takes a new connection when the writer's was lost (a
// PostgreSQL server restarted, a proxy cut it): the prepared statements go
// with it. It says whether it had to.
func (w *writer) connectionLost(err error) bool {
	if err == nil || !(errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || w.conn.PingContext(context.Background()) != nil) {
		return false
	}
	w.closeStatements()
	w.stmts = map[string]driver.Stmt{}
	conn, cerr := w.db.Conn(context.Background())
	if cerr != nil {
		return false
	}
	w.conn = conn
	return true
}

// attempt runs the batch in one transaction. Without savepoints, the first
// failing unit aborts the attempt (unless it is the only unit).
func (w *writer) attempt(batch []*writeReq, results []error, savepoints bool, chain int64) error {
	stx, err := w.begin()
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// A Context gives the session a Statement of its own: without one,
	// gorm shares wdb's, and setting the transaction there would leave it
	// as wdb's pool after the batch (Close could then not reach the pool).
	gtx := w.store.wdb.Session(&gorm.Session{NewDB: true, Context: context.Background()})
	gtx.Statement.ConnPool = stx
	tx := &Tx{db: gtx, w: w, d: w.store.d, self: w.store.self, chain: chainState{no: chain}}
	abort := func(err error) error {
		stx.Rollback()
		return err
	}
	if w.store.d.pg {
		// The chain's head is locked first, for the whole batch: the next
		// batch to append to it, here or on an instance acting on one of
		// its calls, links to what this one appended.
		if err := tx.loadChain(); err != nil {
			return abort(err)
		}
	}
	pending := 0
	for i := range batch {
		if results[i] == nil {
			pending++
		}
	}
	tx.batched = pending > 1
	ran := 0
	for i, r := range batch {
		if results[i] != nil {
			continue
		}
		tx.now = w.store.now().Truncate(time.Microsecond)
		if !savepoints {
			if err := callUnit(r.fn, tx); err != nil {
				if !retryable(err) {
					results[i] = err
				}
				return abort(unitFailed(err, len(batch) == 1))
			}
			ran++
			continue
		}
		unitErr, err := tx.inSavepoint(r.fn)
		if unitErr != nil {
			results[i] = unitErr
		} else if err == nil {
			ran++
		}
		if err != nil {
			return abort(err)
		}
	}
	if ran == 0 {
		return abort(nil)
	}
	for i := 0; i < len(tx.before); i++ { // (a hook may add hooks)
		tx.now = tx.before[i].now
		if err := tx.Try(tx.before[i].fn); err != nil && retryable(err) {
			return abort(err)
		}
	}
	if err := tx.saveChainHead(); err != nil {
		return abort(err)
	}
	began := time.Now()
	if err := stx.Commit(); err != nil {
		return abort(w.commitFailed(err, batch, results, savepoints, pending > 1))
	}
	w.committed(tx, ran, time.Since(began))
	return nil
}

// committed counts a batch that committed, tells the observer and runs the
// units' after-commit hooks.
func (w *writer) committed(tx *Tx, ran int, took time.Duration) {
	if w.store.wal != nil {
		w.store.wal.committed()
	}
	w.commits.Add(1)
	w.units.Add(int64(ran))
	if o := w.store.observer(); o != nil {
		o.Committed(ran, took, tx.moved)
	}
	for _, fn := range tx.after {
		fn()
	}
	if fn := w.store.finished.Load(); fn != nil && len(tx.finals) > 0 {
		(*fn)(append([]string(nil), tx.finals...))
	}
}
