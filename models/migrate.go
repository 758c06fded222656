package models

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"gorm.io/gorm"

	"github.com/countersign/countersign/models/migrations"
)

// goose keeps the versions applied in this table.
const versionTable = "goose_db_version"

// demoVersionTable keeps the versions of the demo shop's own migrations
// (migrations/demo), apart from the product's.
const demoVersionTable = "goose_demo_version"

// migrateDemo makes the demo shop's tables in a SQLite database.
func migrateDemo(db *gorm.DB) error {
	pool, err := db.DB()
	if err != nil {
		return err
	}
	dir, err := fs.Sub(migrations.Demo, "demo/sqlite")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, dir, goose.WithDisableGlobalRegistry(true),
		goose.WithTableName(demoVersionTable))
	if err != nil {
		return err
	}
	_, err = p.Up(context.Background())
	return err
}

// migrateSQLite brings a SQLite database to this version's schema with the
// versioned migrations in migrations/sqlite. A database made before there
// were versioned migrations (it has tables but no version table) is first
// brought forward the way those releases did it (migrateLegacy: gorm's
// AutoMigrate of the records, and the rebuilds below), which leaves it in
// the shape of the latest migration; then every migration is recorded as
// applied without running it again. TestMigrationsMatchTheRecords holds the
// migrations and the records to the same shape.
func migrateSQLite(db *gorm.DB) error {
	ctx := context.Background()
	var tables []string
	if err := db.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, 'tool_calls')`, versionTable).
		Scan(&tables).Error; err != nil {
		return err
	}
	pool, err := db.DB()
	if err != nil {
		return err
	}
	dir, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		return err
	}
	if len(tables) == 1 && tables[0] == "tool_calls" {
		if err := migrateLegacy(db); err != nil {
			return err
		}
		if err := markApplied(ctx, pool, dir); err != nil {
			return fmt.Errorf("record the versions: %w", err)
		}
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, pool, dir, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// markApplied records every migration in dir as applied, as goose would
// have after running them.
func markApplied(ctx context.Context, pool *sql.DB, dir fs.FS) error {
	store, err := database.NewStore(goose.DialectSQLite3, versionTable)
	if err != nil {
		return err
	}
	files, err := fs.Glob(dir, "*.sql")
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
	versions := []int64{0} // goose's own first row
	for _, f := range files {
		v, err := goose.NumericComponent(f)
		if err != nil {
			return err
		}
		versions = append(versions, v)
	}
	for _, v := range versions {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// migrateLegacy is how releases before versioned migrations brought a
// database forward: gorm's AutoMigrate of the records, with the rebuilds it
// cannot do itself.
func migrateLegacy(db *gorm.DB) error {
	if err := db.AutoMigrate(&Run{}); err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	if err := migrateToolCalls(db); err != nil {
		return fmt.Errorf("tool_calls: %w", err)
	}
	if err := dropChangedIndexes(db); err != nil {
		return err
	}
	return db.AutoMigrate(allRecords...)
}

// allRecords is every record with a table: the product's and the demo
// shop's. The schema tests hold the migrations of both dialects to them.
var allRecords = []any{&Run{}, &Turn{}, &ToolCall{}, &Approval{}, &AuditEvent{}, &AuditHead{},
	&Customer{}, &Order{}, &Refund{}, &Staff{}, &Session{}, &APIToken{}, &Agent{}, &Instance{}, &ShadowDecision{}, &Delivery{}, &Grant{}, &ToolPin{}}

// Tool calls are inserted, looked up and updated by their id thousands of
// times a second. Stored WITHOUT ROWID the row lives in the id's own b-tree
// instead of a table b-tree plus an index on id: one b-tree fewer to search
// and to write on every insert and update (BENCHMARKS.md, "tool_calls WITHOUT
// ROWID"). gorm creates the table with that option;
// a database made before is rebuilt once, the way SQLite documents for
// changing how a table is stored.
func migrateToolCalls(db *gorm.DB) error {
	var ddl string
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tool_calls'`).Scan(&ddl).Error; err != nil {
		return err
	}
	switch {
	case ddl == "":
		return db.Set("gorm:table_options", "WITHOUT ROWID").Migrator().CreateTable(&ToolCall{})
	case strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID"):
		return nil
	}
	return rebuildToolCallsWithoutRowid(db, ddl)
}

// rebuildToolCallsWithoutRowid copies the table into one with the same
// definition (columns and constraint names, so gorm sees no difference)
// stored WITHOUT ROWID, and puts it in the old one's place.
func rebuildToolCallsWithoutRowid(db *gorm.DB, ddl string) error {
	open := strings.IndexByte(ddl, '(')
	if open < 0 {
		return fmt.Errorf("unexpected definition %q", ddl)
	}
	create := `CREATE TABLE "tool_calls_new" ` + ddl[open:] + " WITHOUT ROWID"
	// Foreign keys must be off while the table is swapped (approvals point
	// at it), and that can only be changed outside a transaction. The
	// writer pool has a single connection, so the setting holds for the
	// transaction below.
	if err := db.Exec("PRAGMA foreign_keys = OFF").Error; err != nil {
		return err
	}
	defer db.Exec("PRAGMA foreign_keys = ON")
	return db.Transaction(func(tx *gorm.DB) error {
		var cols []string
		if err := tx.Raw(`SELECT name FROM pragma_table_info('tool_calls')`).Scan(&cols).Error; err != nil {
			return err
		}
		// Index names are global: drop the old ones; AutoMigrate makes them
		// again on the new table.
		var indexes []string
		if err := tx.Raw(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tool_calls' AND sql IS NOT NULL`).
			Scan(&indexes).Error; err != nil {
			return err
		}
		for _, ix := range indexes {
			if err := tx.Exec("DROP INDEX " + quoteIdent(ix)).Error; err != nil {
				return err
			}
		}
		if err := tx.Exec(create).Error; err != nil {
			return err
		}
		quoted := make([]string, len(cols))
		for i, c := range cols {
			quoted[i] = quoteIdent(c)
		}
		list := strings.Join(quoted, ", ")
		steps := []string{
			"INSERT INTO tool_calls_new (" + list + ") SELECT " + list + " FROM tool_calls",
			"DROP TABLE tool_calls",
			"ALTER TABLE tool_calls_new RENAME TO tool_calls",
		}
		for _, q := range steps {
			if err := tx.Exec(q).Error; err != nil {
				return err
			}
		}
		var broken int64
		if err := tx.Raw(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&broken).Error; err != nil {
			return err
		}
		if broken > 0 {
			return fmt.Errorf("%d rows would break a foreign key after the rebuild", broken)
		}
		return nil
	})
}

// dropChangedIndexes drops indexes whose definition changed since a
// database was made (gorm only creates missing indexes, by name); the
// AutoMigrate that follows creates them as they are now.
func dropChangedIndexes(db *gorm.DB) error {
	// Before the status index left out succeeded calls it had no WHERE.
	var ddl string
	if err := db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'idx_tool_calls_status_created'`).Scan(&ddl).Error; err != nil {
		return err
	}
	if ddl != "" && !strings.Contains(strings.ToUpper(ddl), "WHERE") {
		return db.Exec("DROP INDEX idx_tool_calls_status_created").Error
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
