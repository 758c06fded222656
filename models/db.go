package models

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned when a conditional state change found the record
// in another state than the one it expected (for example "already decided").
var ErrConflict = errors.New("conflict")

// ErrClosed is returned by Write after the store was closed.
var ErrClosed = errors.New("store is closed")

// Store is the application's database: a gorm handle for reads and a single
// batching writer for every state change (see writer.go).
type Store struct {
	db     *gorm.DB
	writer *writer
	// Now is the clock used for record timestamps; tests replace it.
	Now func() time.Time
}

// Options tunes Open. The zero value is the production setting.
type Options struct {
	// MaxBatch caps how many Write calls share one transaction (default 256).
	MaxBatch int
}

// Open opens (creating if needed) the SQLite database at path, applies the
// connection settings Countersign relies on (WAL, busy timeout, foreign keys,
// immediate write transactions) and migrates the schema.
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("database path is empty")
	}
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path)), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	// Readers run in parallel thanks to WAL; writes are funnelled through
	// one writer goroutine, so a small pool is enough.
	sqlDB.SetMaxOpenConns(8)
	sqlDB.SetMaxIdleConns(8)
	sqlDB.SetConnMaxIdleTime(0)
	if err := sqlDB.Ping(); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := migrate(db); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("migrate database %s: %w", path, err)
	}
	s := &Store{db: db, Now: func() time.Time { return time.Now().UTC() }}
	s.writer = newWriter(s, opts.MaxBatch)
	return s, nil
}

// sqliteDSN builds the mattn/go-sqlite3 DSN. _txlock=immediate makes every
// transaction take the write lock at BEGIN, so a read-then-write transaction
// never fails half-way with "database is locked"; the busy timeout makes a
// second process (the CLI beside a running server) wait instead of failing.
func sqliteDSN(path string) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return "file:" + path + sep + q.Encode()
}

// Close stops the writer (after it has finished what it was given) and closes
// the database.
func (s *Store) Close() error {
	s.writer.close()
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
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

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random 128-bit identifier with a readable prefix, such as
// "call_k3x...". Identifiers are unguessable so they can appear in URLs.
func NewID(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

func notFound(err error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ErrNotFound
	}
	return err
}
