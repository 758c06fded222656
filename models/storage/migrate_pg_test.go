package storage

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// pgDatabase is a new database on the test server, dropped after the test.
func pgDatabase(t *testing.T, server string) string {
	t.Helper()
	admin, err := sql.Open("pgx", server)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "cs_schema_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close()
	})
	u, _ := url.Parse(server)
	u.Path = "/" + name
	return u.String()
}

// pgShape is a PostgreSQL database's tables and their columns, with
// whether each may be null: what the records and the migrations must
// agree on (types are each dialect's own: the migrations give sizes gorm
// leaves out). rate_buckets is PostgreSQL's alone (the shared rate
// limits, written by hand in ratelimit.go) and has no record.
func pgShape(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT table_name, column_name, is_nullable FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name NOT IN ($1, $2, 'rate_buckets') ORDER BY table_name, column_name`, versionTable, demoVersionTable)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var table, col, nullable string
		if err := rows.Scan(&table, &col, &nullable); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s.%s nullable=%s", table, col, nullable))
	}
	return out
}

// On PostgreSQL too the migrations and the records describe one schema:
// the same tables, the same columns.
func TestPostgresMigrationsMatchTheRecords(t *testing.T) {
	server := os.Getenv("COUNTERSIGN_TEST_POSTGRES")
	if server == "" {
		t.Skip("needs PostgreSQL (COUNTERSIGN_TEST_POSTGRES)")
	}
	migrated, err := Open(pgDatabase(t, server), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer migrated.Close()
	records, err := gorm.Open(postgres.Open(pgDatabase(t, server)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := records.AutoMigrate(allRecords...); err != nil {
		t.Fatal(err)
	}
	rdb, _ := records.DB()
	defer rdb.Close()
	// The audit search's table (00024) is no record's: the follower keeps
	// it (TestAuditTextSearchIgnoresCase).
	got := slices.DeleteFunc(pgShape(t, migrated.pool), func(line string) bool { return strings.HasPrefix(line, "call_text.") })
	want := pgShape(t, rdb)
	names := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			out = append(out, strings.Fields(l)[0])
		}
		return out
	}
	if g, w := names(got), names(want); !slices.Equal(g, w) {
		var onlyG, onlyW []string
		for _, x := range g {
			if !slices.Contains(w, x) {
				onlyG = append(onlyG, x)
			}
		}
		for _, x := range w {
			if !slices.Contains(g, x) {
				onlyW = append(onlyW, x)
			}
		}
		t.Fatalf("columns only the migrations make: %v\ncolumns only the records make: %v", onlyG, onlyW)
	}
	var differ []string
	for i := range got {
		if got[i] != want[i] {
			differ = append(differ, got[i]+" (the records: "+strings.Fields(want[i])[1]+")")
		}
	}
	if len(differ) > 0 {
		t.Fatalf("columns the migrations and the records disagree on:\n%s", strings.Join(differ, "\n"))
	}
}
