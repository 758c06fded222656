package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store is the application's database: a gorm handle for reads and a single
// batching writer for every state change (see writer.go).
type Store struct {
	reads sync.Map // query -> *sql.Stmt on the read pool, for hot reads
	db    *gorm.DB // readers: a small pool, running in parallel thanks to WAL
	// reports is people's heavy reads (insights): a pool of ReportConns
	// connections of its own, so that however many people read, the
	// gate's connections stay the gate's.
	reports *gorm.DB
	wdb     *gorm.DB         // the single writer connection, used only by the writer goroutine
	writer  *writer          // SQLite: the single batching writer
	wal     *walCheckpointer // SQLite: the write-ahead log's checkpoints
	// textKept says SQLite's driver has FTS5 and the audit search's
	// index is made (textindex.go); the follower keeps it.
	textKept bool
	d        dialect
	// pool is PostgreSQL's connection pool: reads and write transactions,
	// each unit of work in a transaction of its own (postgres.go).
	pool *sql.DB
	// own names the business schema opened with the store (Options.Own):
	// its tables are there ("" when none).
	own string
	dsn string // PostgreSQL's URL, for the connection that listens
	// self is this process among the servers sharing the database
	// (instances.go): the owner of the calls it runs.
	self string
	// chain is the audit chain this instance appends to, claimed through
	// chainConn on PostgreSQL (chains.go); 0 on SQLite.
	chain     int64
	chainConn *sql.Conn
	outbox    atomic.Pointer[outboxHolder]   // SetOutbox
	finished  atomic.Pointer[func([]string)] // SetFinished
	// watcher hears what the writer committed (Observe).
	watcher atomic.Pointer[observerBox]
	// Now is the clock used for record timestamps; tests replace it.
	Now func() time.Time
	// sessionRuns are the runs of agents' sessions read lately (AgentRun).
	sessionRuns sessionRuns
}

// Options tunes Open. The zero value is the production setting.
type Options struct {
	// MaxBatch caps how many Write calls share one transaction (default 256).
	MaxBatch int
	// Own also makes a business's own tables (the demo shop's, demo/shop):
	// a database opened without it has none.
	Own *Schema
}

// ReportConns is how many connections people's heavy reads (insights)
// may hold at once, on a pool apart from the gate's.
const ReportConns = 2

// Open opens the database: PostgreSQL for a postgres:// or postgresql://
// URL (postgres.go), otherwise the SQLite file at that path, created if
// needed. Either way the schema is migrated to this version first.
//
// For SQLite it applies the connection settings Countersign relies on (WAL,
// busy timeout, foreign keys, immediate write transactions).
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("database path is empty")
	}
	if IsPostgres(path) {
		return openPostgres(path, opts)
	}
	// SQLite has one writer at a time: give it one connection of its own, so
	// its prepared statements stay warm, and let readers share a pool.
	wdb, err := openPool(writerDriver, path, 1, 64<<10, false)
	if err != nil {
		return nil, err
	}
	if err := migrateSQLite(wdb); err != nil {
		closePool(wdb)
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	if opts.Own != nil {
		if err := migrateOwn(wdb, opts.Own); err != nil {
			closePool(wdb)
			return nil, fmt.Errorf("set up %s's tables in %s: %w", opts.Own.Name, path, err)
		}
	}
	indexed, err := keepTextIndex(wdb)
	if err != nil {
		closePool(wdb)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	db, err := openPool(sqlite.DriverName, path, 8, 16<<10, true)
	if err != nil {
		closePool(wdb)
		return nil, err
	}
	reports, err := openPool(sqlite.DriverName, path, ReportConns, 16<<10, false)
	if err != nil {
		closePool(db)
		closePool(wdb)
		return nil, err
	}
	s := &Store{db: db, reports: reports, wdb: wdb, self: models.NewID("inst"), own: opts.Own.name(), Now: func() time.Time { return time.Now().UTC() }}
	conn, err := wdb.DB()
	if err != nil {
		return nil, err
	}
	readers, err := db.DB()
	if err != nil {
		return nil, err
	}
	s.wal = newWALCheckpointer(readers)
	if s.writer, err = newWriter(s, conn, opts.MaxBatch); err != nil {
		s.wal.close()
		closePool(db)
		closePool(wdb)
		return nil, err
	}
	s.textKept = indexed
	return s, nil
}

func openPool(driver, path string, conns, cacheKiB int, prepare bool) (*gorm.DB, error) {
	db, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: driver, DSN: sqliteDSN(path, cacheKiB)}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		PrepareStmt:            prepare,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	sqlDB.SetConnMaxIdleTime(0)
	if err := sqlDB.Ping(); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

func closePool(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// sqliteDSN builds the mattn/go-sqlite3 DSN. _txlock=immediate makes every
// transaction take the write lock at BEGIN, so a read-then-write transaction
// never fails half-way with "database is locked"; the busy timeout makes a
// second process (the CLI beside a running server) wait instead of failing.
func sqliteDSN(path string, cacheKiB int) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	// A larger page cache keeps the indexes the writer touches in memory
	// (BENCHMARKS.md, "After the audit indexes and a larger page cache").
	q.Set("_cache_size", fmt.Sprint(-cacheKiB))
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return "file:" + path + sep + q.Encode()
}

// Close stops the writer (after it has finished what it was given) and closes
// the database.
func (s *Store) Close() error {
	if s.d.pg {
		s.writer.close()
		s.reads.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
		// Its audit chain is free once this connection goes (a second
		// Close finds it gone already).
		var released error
		if err := s.chainConn.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
			released = err
		}
		return errors.Join(released, closePool(s.reports), s.pool.Close())
	}
	s.writer.close()
	s.wal.close()
	s.reads.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
	return errors.Join(closePool(s.db), closePool(s.reports), closePool(s.wdb))
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

func (s *Store) now() time.Time { return s.Now().UTC() }

// readRow runs a hot read through a prepared statement, skipping gorm.
func (s *Store) readRow(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	if v, ok := s.reads.Load(query); ok {
		return v.(*sql.Stmt).QueryRowContext(ctx, args...), nil
	}
	pool, err := s.db.DB()
	if err != nil {
		return nil, err
	}
	stmt, err := pool.PrepareContext(ctx, s.d.rebind(query))
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.reads.LoadOrStore(query, stmt); loaded {
		stmt.Close()
		stmt = prev.(*sql.Stmt)
	}
	return stmt.QueryRowContext(ctx, args...), nil
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return models.ErrNotFound
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return models.ErrNotFound
	}
	return err
}
