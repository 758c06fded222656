package storage

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/migrations"
)

// A database whose accounts were linked to Slack users in the column of
// migration 00005 keeps those links after 00022, on SQLite: the same Slack
// user acts as the same account; going back down puts them in the column
// again.
func TestSlackLinksMoveIntoStaffLinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "before.db")
	pool, err := sql.Open("sqlite3", sqliteDSN(path, 2048))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := fs.Sub(migrations.SQLite, "sqlite")
	slackLinksMove(t, pool, goose.DialectSQLite3, dir, sqliteVersionTable, func() (*Store, error) { return Open(path, Options{}) })
}

// The same on PostgreSQL.
func TestPostgresSlackLinksMoveIntoStaffLinks(t *testing.T) {
	server := os.Getenv("COUNTERSIGN_TEST_POSTGRES")
	if server == "" {
		t.Skip("needs PostgreSQL (COUNTERSIGN_TEST_POSTGRES)")
	}
	dsn := pgDatabase(t, server)
	pool, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := fs.Sub(migrations.Postgres, "postgres")
	slackLinksMove(t, pool, goose.DialectPostgres, dir, versionTable, func() (*Store, error) { return Open(dsn, Options{}) })
}

func slackLinksMove(t *testing.T, pool *sql.DB, dialect goose.Dialect, dir fs.FS, table string, open func() (*Store, error)) {
	t.Helper()
	ctx := context.Background()
	p, err := goose.NewProvider(dialect, pool, dir, goose.WithDisableGlobalRegistry(true), goose.WithTableName(table))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO staffs (id, email, name, role, password_hash, disabled, created_at, updated_at, slack_user_id) VALUES ($1, $2, $3, 'approver', '', false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, $4)"
	for _, row := range [][3]string{{"stf_ann", "ann@x.test", "U0ANN"}, {"stf_bob", "bob@x.test", ""}} {
		if _, err := pool.ExecContext(ctx, insert, row[0], row[1], row[0], row[2]); err != nil {
			t.Fatal(err)
		}
	}

	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.StaffByLink(ctx, "slack", "U0ANN")
	if err != nil || st.ID != "stf_ann" {
		t.Fatalf("the Slack user should act as ann still: %+v, %v", st, err)
	}
	links, err := s.StaffLinks(ctx)
	if err != nil || len(links) != 1 || links["stf_ann"]["slack"] != "U0ANN" {
		t.Fatalf("links after the migration: %v, %v", links, err)
	}
	// One address is one account's: bob cannot take ann's.
	if err := s.LinkStaff(ctx, "stf_bob", "slack", "U0ANN", "staff:stf_adm"); !errors.Is(err, models.ErrLinkTaken) {
		t.Fatalf("bob took ann's Slack user: %v", err)
	}
	// Unlinking ann frees it, and each change is audited with its channel.
	if err := s.LinkStaff(ctx, "stf_ann", "slack", "", "staff:stf_adm"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StaffByLink(ctx, "slack", "U0ANN"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("an unlinked Slack user still acts as ann: %v", err)
	}
	if err := s.LinkStaff(ctx, "stf_bob", "slack", "U0ANN", "staff:stf_adm"); err != nil {
		t.Fatal(err)
	}
	var ev models.AuditEvent
	if err := s.db.Where("kind = ? AND subject = ?", models.EventStaffUpdated, "stf_bob").Last(&ev).Error; err != nil {
		t.Fatal(err)
	}
	if want := `"link":{"channel":"slack","from":"","to":"U0ANN"}`; !strings.Contains(ev.Payload, want) {
		t.Fatalf("the audit event says %s, want %s in it", ev.Payload, want)
	}
	s.Close()

	// Down again: the link is a column once more.
	if _, err := p.DownTo(ctx, 21); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pool.QueryRowContext(ctx, "SELECT id FROM staffs WHERE slack_user_id = 'U0ANN'").Scan(&id); err != nil || id != "stf_bob" {
		t.Fatalf("after going down, U0ANN is %q's: %v", id, err)
	}
	pool.Close()
}
