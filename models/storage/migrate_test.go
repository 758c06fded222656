package storage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/migrations"
	"github.com/pressly/goose/v3"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

func schemaOf(t *testing.T, db *gorm.DB, table string) (ddl string, indexes []string) {
	t.Helper()
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL ORDER BY name`, table).
		Scan(&indexes).Error; err != nil {
		t.Fatal(err)
	}
	return ddl, indexes
}

// A database made before the last release without versioned migrations
// (its calls table has a rowid) is refused with what to do, and left as it
// was.
func TestADatabaseOlderThanTheBaselineIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := gorm.Open(sqlite.Open(sqliteDSN(path, 2048)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.AutoMigrate(&models.Run{}, &models.Turn{}, &models.ToolCall{}, &models.Approval{}); err != nil { // the old way: a rowid table
		t.Fatal(err)
	}
	if err := old.Create(&models.Run{ID: "run_1", Status: "active"}).Error; err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := old.DB()
	sqlDB.Close()
	if s, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "3c16be5") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("an older database opened, or the error does not say which release to use: %v", err)
	}
	again, err := gorm.Open(sqlite.Open(sqliteDSN(path, 2048)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db, _ := again.DB(); db.Close() }()
	var tables []string
	again.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'goose%'`).Scan(&tables)
	if len(tables) != 0 {
		t.Fatalf("the refused database was changed: %v", tables)
	}
}

// A database numbered the way SQLite numbered its migrations before both
// dialects shared the numbers, fully migrated or halfway, has its versions
// translated once and takes only the migrations it lacks.
func TestOldSQLiteNumbersAreTranslated(t *testing.T) {
	for _, upTo := range []int64{11, 6, 1} {
		t.Run(fmt.Sprint("up to ", upTo), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "numbered.db")
			oldNumbering(t, path, upTo)
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var versions []int64
			s.db.Raw(`SELECT version_id FROM ` + sqliteVersionTable + ` WHERE is_applied ORDER BY version_id`).Scan(&versions)
			var old int64
			s.db.Raw(`SELECT count(*) FROM sqlite_master WHERE name = ?`, oldSQLiteVersionTable).Scan(&old)
			fresh, err := Open(filepath.Join(t.TempDir(), "fresh.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, want := shape(t, s.db), shape(t, fresh.db)
			fresh.Close()
			s.Close()
			files, _ := fs.Glob(migrations.SQLite, "sqlite/*.sql")
			if len(versions) != len(files)+1 || versions[0] != 0 || versions[len(files)] != int64(len(files)) || old != 0 {
				t.Fatalf("versions after the translation: %v (old table left: %d)", versions, old)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("translated database:\n%s\n\nnew one:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// oldNumbering makes a database migrated up to a shared version, then
// records its versions as the old numbering did, in the old table.
func oldNumbering(t *testing.T, path string, upTo int64) {
	t.Helper()
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, 2048)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := db.DB()
	defer pool.Close()
	dir, _ := fs.Sub(migrations.SQLite, "sqlite")
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, dir, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), upTo); err != nil {
		t.Fatal(err)
	}
	back := map[int64]int64{}
	for old, v := range sqliteRenumbered {
		back[v] = old
	}
	var rows []struct{ ID, VersionID int64 }
	db.Raw(`SELECT id, version_id FROM goose_db_version`).Scan(&rows)
	for _, r := range rows {
		var err error
		if old, ok := back[r.VersionID]; ok {
			err = db.Exec(`UPDATE goose_db_version SET version_id = ? WHERE id = ?`, old, r.ID).Error
		} else { // an empty step, which the old numbering did not have
			err = db.Exec(`DELETE FROM goose_db_version WHERE id = ?`, r.ID).Error
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The status index leaves succeeded calls out; the queries by status must
// still be answered from it (they add notSucceeded for that).
func TestQueriesByStatusUseThePartialIndex(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "plans.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	dry := func(db *gorm.DB) (string, []any) {
		var rows []map[string]any
		st := db.Session(&gorm.Session{DryRun: true}).Scan(&rows).Statement
		return st.SQL.String(), st.Vars
	}
	plan := func(name string, sql string, vars []any) string {
		var steps []struct {
			ID, Parent, NotUsed int
			Detail              string
		}
		if err := s.db.Raw("EXPLAIN QUERY PLAN "+sql, vars...).Scan(&steps).Error; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out []string
		for _, st := range steps {
			out = append(out, st.Detail)
		}
		return strings.Join(out, " | ")
	}
	for _, status := range []models.CallStatus{models.CallRejected, models.CallPending, models.CallFailed} {
		sql, vars := dry(s.auditQuery(ctx, models.AuditQuery{Status: status}).Limit(51))
		if p := plan("audit "+string(status), sql, vars); !strings.Contains(p, "idx_tool_calls_status_created") {
			t.Errorf("audit filtered by %s does not use the status index: %s", status, p)
		}
	}
	sql, vars := dry(s.db.Model(&models.ToolCall{}).Where("status = ?", models.CallPending).Where(notSucceeded).Order("created_at, id"))
	if p := plan("pending", sql, vars); !strings.Contains(p, "idx_tool_calls_status_created") {
		t.Errorf("pending calls do not use the status index: %s", p)
	}
}

// shape is a SQLite database's tables, columns and indexes, as text that
// does not depend on how they were created.
func shape(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var out []string
	var tables []string
	if err := db.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN (?, ?, ?) ORDER BY name`, versionTable, sqliteVersionTable, demoVersionTable).
		Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		var cols []struct {
			Name, Type string
			Notnull    int
			Dflt       *string `gorm:"column:dflt_value"`
			Pk         int
		}
		if err := db.Raw(`SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?)`, table).Scan(&cols).Error; err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			d := ""
			if c.Dflt != nil {
				d = *c.Dflt
			}
			out = append(out, fmt.Sprintf("%s.%s %s notnull=%d default=%s pk=%d", table, c.Name, c.Type, c.Notnull, d, c.Pk))
		}
		ddl, indexes := schemaOf(t, db, table)
		out = append(out, fmt.Sprintf("%s without rowid=%t", table, strings.Contains(ddl, "WITHOUT ROWID")))
		for _, ix := range indexes {
			out = append(out, strings.Replace(ix, "IF NOT EXISTS ", "", 1))
		}
	}
	return out
}

// The versioned migrations and the records (what gorm makes of them)
// describe the same schema: a change to a record needs a migration, and a
// migration needs the record to change with it.
func TestMigrationsMatchTheRecords(t *testing.T) {
	dir := t.TempDir()
	migrated, err := Open(filepath.Join(dir, "migrated.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer migrated.Close()
	legacy, err := gorm.Open(sqlite.Open(sqliteDSN(filepath.Join(dir, "legacy.db"), 2048)), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := legacy.AutoMigrate(&models.Run{}); err != nil { // first: tool_calls would make it, WITHOUT ROWID too
		t.Fatal(err)
	}
	if err := legacy.Set("gorm:table_options", "WITHOUT ROWID").AutoMigrate(&models.ToolCall{}); err != nil {
		t.Fatal(err)
	}
	if err := legacy.AutoMigrate(allRecords...); err != nil {
		t.Fatal(err)
	}
	// The audit search's index (00013) is no record's table: it is made by
	// its migration alone and kept by triggers (TestTheTextIndexFindsWhatLikeFinds).
	got := slices.DeleteFunc(shape(t, migrated.db), func(line string) bool { return strings.HasPrefix(line, "audit_text") })
	want := shape(t, legacy)
	if !slices.Equal(got, want) {
		t.Fatalf("the migrations give:\n%s\n\nthe records give:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A database made by the last release before versioned migrations opens
// with its data and audit chain intact, is recorded as at the latest
// version, takes new work, and opens again without migrating twice.
func TestReleaseDatabaseMigratesForward(t *testing.T) {
	path := filepath.Join(t.TempDir(), "release.db")
	data, err := os.ReadFile("testdata/release-3c16be5.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.VerifyAuditChain(ctx)
	if err != nil || !rep.OK || rep.Events != 43 {
		t.Fatalf("the release's audit chain: %+v %v", rep, err)
	}
	pending, err := s.PendingActions(ctx, models.ActionFilter{})
	if err != nil || len(pending) != 1 || pending[0].Tool != "issue_refund" {
		t.Fatalf("the release's pending action: %+v %v", pending, err)
	}
	if st, err := s.StaffByEmail(ctx, "ann@shop.test"); err != nil || st.Role != models.Approver {
		t.Fatalf("the release's staff: %+v %v", st, err)
	}
	fresh, err := Open(filepath.Join(t.TempDir(), "fresh.db"), Options{Own: demoSchema})
	if err != nil {
		t.Fatal(err)
	}
	got, want := shape(t, s.db), shape(t, fresh.db)
	fresh.Close()
	if !slices.Equal(got, want) {
		t.Fatalf("the release's database after the migrations:\n%s\n\na new one:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var versions []int64
	if err := s.db.Raw(`SELECT version_id FROM ` + sqliteVersionTable + ` WHERE is_applied ORDER BY id`).Scan(&versions).Error; err != nil {
		t.Fatal(err)
	}
	files, _ := fs.Glob(migrations.SQLite, "sqlite/*.sql")
	if len(versions) != len(files)+1 || versions[0] != 0 {
		t.Fatalf("versions recorded %v for %d migrations", versions, len(files))
	}
	if err := s.Write(ctx, func(tx *Tx) error {
		return tx.Audit(models.Event{Actor: "test", Kind: "test.after_migration", Subject: "x"})
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rep, err := s.VerifyAuditChain(ctx); err != nil || !rep.OK || rep.Events != 44 {
		t.Fatalf("after new work and a second open: %+v %v", rep, err)
	}
	var again []int64
	s.db.Raw(`SELECT version_id FROM ` + sqliteVersionTable).Scan(&again)
	if len(again) != len(versions) {
		t.Fatalf("opened twice, versions %v became %v", versions, again)
	}
}

// A database made without the demo has none of the demo shop's tables (and
// demo/shop refuses to seed it, TestTheShopSeedsOnlyItsOwnTables); opened
// for the demo, it gets them.
func TestOnlyTheDemoMakesTheShopTables(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tables := func(s *Store) []string {
		var out []string
		if err := s.db.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('customers', 'orders', 'refunds') ORDER BY name`).
			Scan(&out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := tables(s); len(got) != 0 {
		t.Fatalf("a database made without --demo has %v", got)
	}
	if s.Has("demo") {
		t.Fatal("a database made without --demo says it has the demo's tables")
	}
	s.Close()
	s, err = Open(path, Options{Own: demoSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := tables(s); !slices.Equal(got, []string{"customers", "orders", "refunds"}) {
		t.Fatalf("opened for the demo: %v", got)
	}
	if !s.Has("demo") {
		t.Fatal("opened for the demo, it says it has not the demo's tables")
	}
}

// demoSchema is the demo shop's tables (demo/shop), read from its folder:
// the store's own tests cannot import the shop, which imports the store.
var demoSchema = &Schema{Name: "demo", SQLite: os.DirFS("../../demo/shop/migrations/sqlite"), Postgres: os.DirFS("../../demo/shop/migrations/postgres")}

const demoVersionTable = "goose_demo_version"
