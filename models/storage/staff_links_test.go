package storage

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/migrations"
)

// A database whose accounts were linked to Slack users in the column of
// migration 00005 keeps those links after 00022: the same Slack user acts
// as the same account.
func TestSlackLinksMoveIntoStaffLinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "before.db")
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, 2048)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := db.DB()
	dir, _ := fs.Sub(migrations.SQLite, "sqlite")
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, dir, goose.WithDisableGlobalRegistry(true), goose.WithTableName(sqliteVersionTable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), 21); err != nil {
		t.Fatal(err)
	}
	for _, row := range [][3]string{{"stf_ann", "ann@x.test", "U0ANN"}, {"stf_bob", "bob@x.test", ""}} {
		if err := db.Exec("INSERT INTO staffs (id, email, name, role, password_hash, disabled, created_at, updated_at, slack_user_id) VALUES (?, ?, ?, 'approver', '', false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, ?)",
			row[0], row[1], row[0], row[2]).Error; err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()

	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
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
	// Unlinking ann frees it, and the change is audited with its channel.
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
}
