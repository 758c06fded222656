package models

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// In WAL mode every commit appends pages to the write-ahead log, and from
// time to time those pages must be copied back into the database file (a
// checkpoint). SQLite does this inside the commit that crosses 1,000 pages,
// so the single writer stops for the copy and for the two fsyncs that go with
// it: measured, that was half of what a commit cost. Here the writer's
// connection never checkpoints on its own; a goroutine on a reader connection
// does the copying in the background, on another core, while the writer goes
// on committing. A background checkpoint can never finish the log while new
// commits keep arriving, so once the log is long the writer finishes the job
// itself between two batches: only the few pages left, after which SQLite
// starts the log again from the beginning.

// writerDriver is the driver of the writer's connection: the same SQLite
// driver with automatic checkpoints turned off.
const writerDriver = "sqlite3_countersign_writer"

func init() {
	sql.Register(writerDriver, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec("PRAGMA wal_autocheckpoint = 0", nil)
		return err
	}})
}

const (
	// checkpointEvery is the shortest time between two background
	// checkpoints. Copying often costs the writer more (the copy and the
	// writer's appends compete for the same files); 200 ms measured best
	// among 20 ms, 200 ms and 1 s.
	checkpointEvery = 200 * time.Millisecond
	// walPagesLimit is the length of the log (in pages, 16 MiB) past which
	// the writer completes a checkpoint itself, so that the log starts over.
	walPagesLimit = 4000
)

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type checkpointer struct {
	db      *sql.DB // a reader pool; any connection may checkpoint
	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// long is set when the log has grown past walPagesLimit.
	long atomic.Bool
}

func newCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{db: db, wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	go c.loop()
	return c
}

// committed tells the checkpointer that the log has grown.
func (c *checkpointer) committed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer close(c.stopped)
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		c.checkpoint(c.db)
		// Let commits gather before the next copy.
		select {
		case <-time.After(checkpointEvery):
		case <-c.quit:
			return
		}
	}
}

// checkpoint copies what it can of the log into the database file without
// waiting for anyone, and reports whether the whole log is now copied.
func (c *checkpointer) checkpoint(db rowQuerier) (complete bool) {
	var busy, logPages, copied int
	if err := db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &copied); err != nil {
		// Another checkpoint is running, or the database is closing: the
		// next commit will ask again.
		return false
	}
	complete = busy == 0 && logPages == copied
	c.long.Store(logPages >= walPagesLimit && !complete)
	return complete
}

// finish is run by the writer between batches when the log is long: with no
// write in progress a checkpoint can copy everything, and the writer's next
// transaction starts the log over.
func (c *checkpointer) finish(writerConn rowQuerier) {
	if !c.long.Load() {
		return
	}
	if c.checkpoint(writerConn) {
		c.long.Store(false)
	}
}

func (c *checkpointer) close() {
	c.once.Do(func() { close(c.quit) })
	<-c.stopped
}
