package storage

import (
	"context"
	"database/sql"
	"io/fs"
	"strconv"
	"strings"

	"github.com/countersign/countersign/models/migrations"
)

// Schema says which migration the database is at and which is the newest
// this binary has: a database behind it was not migrated (a failed start
// left it so), one ahead was migrated by a newer release.
func (s *Store) Schema(ctx context.Context) (have, want int64, err error) {
	files, dir, table := migrations.SQLite, "sqlite", sqliteVersionTable
	if s.d.pg {
		files, dir, table = migrations.Postgres, "postgres", versionTable
	}
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		num, _, _ := strings.Cut(e.Name(), "_")
		if n, err := strconv.ParseInt(num, 10, 64); err == nil && n > want {
			want = n
		}
	}
	var v sql.NullInt64
	err = s.db.WithContext(ctx).Raw("SELECT max(version_id) FROM " + table + " WHERE is_applied").Scan(&v).Error
	return v.Int64, want, err
}

// SQLiteHasFTS5 says whether this binary's SQLite driver has FTS5 (it was
// built with BuildTag), which the audit search's index needs.
func SQLiteHasFTS5() bool {
	db, err := sql.Open(writerDriver, ":memory:")
	if err != nil {
		return false
	}
	defer db.Close()
	var on int
	return db.QueryRow("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on) == nil && on == 1
}
