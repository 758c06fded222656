package storage

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
// it, a large part of what a commit costs (BENCHMARKS.md, "Checkpoints off the
// writer"). Here the writer's
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
	// checkpointEvery is the longest wait between two background
	// checkpoints while commits arrive. Copying often costs the writer more
	// (the copy and the writer's appends compete for the same files); the
	// value is the best of those measured at full load. When the log
	// grows fast the wait is shortened so that about a quarter of the limit
	// comes in between two looks, down to checkpointEveryMin.
	checkpointEvery    = 200 * time.Millisecond
	checkpointEveryMin = 10 * time.Millisecond
	// walPagesLimit is the length of the log (in pages: 128 MiB) past which
	// the writer completes a checkpoint itself, so that the log starts over.
	// Readers only search the part of the log not yet copied, so a long log
	// costs disk space, not reads; each start-over costs the writer a little.
	// BENCHMARKS.md ("Checkpoints off the writer") has the limits measured
	// against throughput and the longest log seen.
	walPagesLimit = 32000
)

type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type walCheckpointer struct {
	db      *sql.DB // a reader pool; any connection may checkpoint
	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// long is set when the log has grown past limit.
	long  atomic.Bool
	limit int // walPagesLimit; tests lower it
}

func newWALCheckpointer(db *sql.DB) *walCheckpointer {
	c := &walCheckpointer{db: db, wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{}), limit: walPagesLimit}
	go c.loop()
	return c
}

// committed tells the walCheckpointer that the log has grown.
func (c *walCheckpointer) committed() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *walCheckpointer) loop() {
	defer close(c.stopped)
	prevPages, prevAt := 0, time.Now()
	rate := 0.0 // pages per second the log grew at, last time it was seen growing
	for {
		select {
		case <-c.wake:
		case <-c.quit:
			return
		}
		// While the writer finishes a long log (a checkpoint here would only
		// get in its way), or after a failed try: look again soon.
		wait := checkpointEveryMin
		if !c.long.Load() {
			if pages := c.checkpoint(c.db); pages >= 0 {
				now := time.Now()
				if pages > prevPages { // (a log that started over says nothing of the rate)
					rate = float64(pages-prevPages) / now.Sub(prevAt).Seconds()
				}
				wait = nextWait(rate, c.limit/4)
				prevPages, prevAt = pages, now
			}
		}
		select {
		case <-time.After(wait):
		case <-c.quit:
			return
		}
	}
}

// nextWait is how long to let commits gather before the next checkpoint:
// checkpointEvery, or less when the log grows at rate pages a second, so that
// about step pages come in meanwhile.
func nextWait(rate float64, step int) time.Duration {
	if rate <= 0 {
		return checkpointEvery
	}
	wait := time.Duration(float64(step) / rate * float64(time.Second))
	return min(max(wait, checkpointEveryMin), checkpointEvery)
}

// checkpoint copies what it can of the log into the database file without
// waiting for anyone, notes whether the log is still long and returns its
// length in pages (-1 when the checkpoint could not run).
func (c *walCheckpointer) checkpoint(db rowQuerier) int {
	var busy, logPages, copied int
	if err := db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &copied); err != nil {
		// Another checkpoint is running, or the database is closing: the
		// next commit will ask again.
		return -1
	}
	c.long.Store(logPages >= c.limit)
	return logPages
}

// finish is run by the writer between batches while the log is long. With
// no write in progress a checkpoint can copy everything; SQLite then starts
// the log over at the writer's next commit, provided no reader still reads an
// older snapshot at that moment. So the writer tries after every batch until
// the log is actually short again (as SQLite's own automatic checkpoint
// does after every commit past its limit); each try copies only the pages
// written since the one before.
func (c *walCheckpointer) finish(writerConn rowQuerier) {
	if c.long.Load() {
		c.checkpoint(writerConn)
	}
}

func (c *walCheckpointer) close() {
	c.once.Do(func() { close(c.quit) })
	<-c.stopped
}
