// Package storetest gives each test a database of its own: a SQLite file in
// the test's temporary folder, or, when COUNTERSIGN_TEST_POSTGRES holds a
// PostgreSQL URL, a new database on that server, dropped after the test.
// `make test` runs the suite both ways when the variable is set.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx"
	_ "github.com/mattn/go-sqlite3"    // database/sql's "sqlite3"

	"github.com/countersign/countersign/models/storage"
)

// Env names the variable that holds the PostgreSQL server's URL.
const Env = "COUNTERSIGN_TEST_POSTGRES"

// Postgres says whether tests run on PostgreSQL.
func Postgres() bool { return os.Getenv(Env) != "" }

// DSN is a new, empty database for the test: what --db takes.
func DSN(t testing.TB) string {
	t.Helper()
	server := os.Getenv(Env)
	if server == "" {
		return filepath.Join(t.TempDir(), "countersign.db")
	}
	u, err := url.Parse(server)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "cs_test_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create a database for the test on %s: %v", u.Host, err)
	}
	t.Cleanup(func() {
		admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close()
	})
	u.Path = "/" + name
	return u.String()
}

// Open opens a new store for the test, closed after it.
func Open(t testing.TB) *storage.Store {
	t.Helper()
	s, _ := OpenDSN(t)
	return s
}

// OpenDSN is Open, with the database's DSN (for Tamper).
func OpenDSN(t testing.TB) (*storage.Store, string) {
	t.Helper()
	return OpenWith(t, storage.Options{})
}

// OpenWith is OpenDSN with options (a business's own tables: Own).
func OpenWith(t testing.TB, opts storage.Options) (*storage.Store, string) {
	t.Helper()
	dsn := DSN(t)
	s, err := storage.Open(dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return s, dsn
}

// Raw is a database/sql handle on a test's database (dsn, as DSN gave it),
// behind the store's back; it is closed after the test.
func Raw(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	driver := "sqlite3"
	if storage.IsPostgres(dsn) {
		driver = "pgx"
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Tamper runs statements on a test's database (dsn, as DSN gave it) behind
// the store's back, as someone holding the database's password could.
func Tamper(t testing.TB, dsn string, stmts ...string) {
	t.Helper()
	db := Raw(t, dsn)
	for _, s := range stmts {
		if _, err := db.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
