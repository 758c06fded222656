package storage

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/migrations"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"gorm.io/gorm"
)

// goose keeps the versions applied in these tables, numbered alike on both
// dialects (a migration that one dialect does not need is an empty step
// there). PostgreSQL's has always been numbered so; SQLite's got a table of
// its own when it took the same numbers.
const (
	versionTable       = "goose_db_version"
	sqliteVersionTable = "goose_schema_version"
)

// SQLite numbered its migrations apart until 2026-12-01, in this table;
// opened, such a database has its versions translated (renumber).
const oldSQLiteVersionTable = "goose_db_version"

// migrateOwn makes a business's own tables in a SQLite database.
func migrateOwn(db *gorm.DB, own *Schema) error {
	pool, err := db.DB()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, own.SQLite, goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(own.versionTable()))
	if err != nil {
		return err
	}
	_, err = p.Up(context.Background())
	return err
}

// migrateSQLite brings a SQLite database to this version's schema with the
// versioned migrations in migrations/sqlite, the only source of the schema
// (TestMigrationsMatchTheRecords holds them to the records). A database made
// by the last release before versioned migrations (3c16be5) has tables and
// no versions: it is in the shape of the baseline, whose statements are IF
// NOT EXISTS, so it takes every migration like a new one. One made before
// that release is refused: it needs that release once, to be brought into
// the baseline's shape.
func migrateSQLite(db *gorm.DB) error {
	ctx := context.Background()
	pool, err := db.DB()
	if err != nil {
		return err
	}
	if err := checkBeforeVersions(db); err != nil {
		return err
	}
	if err := renumber(ctx, pool); err != nil {
		return fmt.Errorf("renumber the migrations: %w", err)
	}
	dir, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, dir, goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(sqliteVersionTable))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// checkBeforeVersions refuses a database made before the last release
// without versioned migrations: its calls table is stored with a rowid,
// which the baseline cannot change.
func checkBeforeVersions(db *gorm.DB) error {
	var tables []string
	if err := db.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, 'tool_calls')`,
		sqliteVersionTable, oldSQLiteVersionTable).Scan(&tables).Error; err != nil {
		return err
	}
	if len(tables) != 1 || tables[0] != "tool_calls" {
		return nil // new, or versioned
	}
	var ddl string
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tool_calls'`).Scan(&ddl).Error; err != nil {
		return err
	}
	if !strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
		return fmt.Errorf("this database was made by a Countersign release older than 3c16be5 (2026-11-30): " +
			"open it once with that release, which brings it into the shape this one starts from")
	}
	return nil
}

// sqliteRenumbered is what each of SQLite's old migration numbers became
// when both dialects were numbered alike; the new numbers between (2 and 7)
// are steps only PostgreSQL needs, empty on SQLite.
var sqliteRenumbered = map[int64]int64{0: 0, 1: 1, 2: 3, 3: 4, 4: 5, 5: 6, 6: 8, 7: 9, 8: 10, 9: 11}

// renumber moves a SQLite database's versions from the old table, in the
// old numbers, to sqliteVersionTable in the shared ones, with the empty
// steps below the newest applied recorded as applied; in one transaction,
// so a database is in one numbering or the other.
func renumber(ctx context.Context, pool *sql.DB) error {
	var n int
	if err := pool.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`,
		oldSQLiteVersionTable).Scan(&n); err != nil || n == 0 {
		return err
	}
	rows, err := pool.QueryContext(ctx, `SELECT version_id FROM `+oldSQLiteVersionTable+` WHERE is_applied ORDER BY id`)
	if err != nil {
		return err
	}
	var applied []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied = append(applied, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	var versions []int64
	for _, old := range applied {
		v, ok := sqliteRenumbered[old]
		if !ok {
			return fmt.Errorf("version %d is newer than this release knows", old)
		}
		versions = append(versions, v)
	}
	if len(versions) > 0 {
		last := versions[len(versions)-1]
		for _, empty := range []int64{2, 7} {
			if empty < last {
				versions = append(versions, empty)
			}
		}
		slices.Sort(versions)
	}
	store, err := database.NewStore(goose.DialectSQLite3, sqliteVersionTable)
	if err != nil {
		return err
	}
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := store.CreateVersionTable(ctx, tx); err != nil {
		return err
	}
	for _, v := range slices.Compact(versions) {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE `+oldSQLiteVersionTable); err != nil {
		return err
	}
	return tx.Commit()
}

// allRecords is every record with a table (the demo shop's are its own,
// demo/shop). The schema tests hold the migrations of both dialects to them.
var allRecords = []any{&models.Run{}, &models.Turn{}, &models.ToolCall{}, &models.Approval{}, &models.AuditEvent{}, &models.AuditHead{},
	&models.Staff{}, &models.Session{}, &models.APIToken{}, &models.Agent{}, &models.Instance{}, &models.ShadowDecision{}, &models.Delivery{}, &models.Grant{}, &models.ToolPin{}, &models.Review{}, &models.SharedSecret{}, &models.OAuthClient{}, &models.OAuthRecord{}, &models.PolicyVersion{}, &models.PolicySignature{}, &models.CallHour{}, &models.CallCounted{}, &models.DerivedMark{}, &models.StaffChange{}, &models.StaffChangeSignature{}, &models.Enrollment{}, &models.Passkey{}, &models.Receipt{}, &models.ReceiptKey{}, &models.StaffLink{}}
