package storage

import (
	"context"
	"database/sql"
	"io/fs"
)

// Schema is a business's own tables in Countersign's database, the demo
// shop's (demo/shop) being the one there is: its migrations per dialect,
// applied when the store opens (Options.Own) under a version table of their
// own, so they never mix with the product's. Its rows are written in units
// of work (Tx.Exec, Tx.QueryRow, with Tx.Audit for the audit chain in the
// same transaction) and read with Store.QueryRow and Store.Query; the SQL
// takes `?` placeholders on both dialects.
type Schema struct {
	// Name names the schema in errors and its version table
	// (goose_<Name>_version).
	Name string
	// SQLite and Postgres are the migrations, at the root of each.
	SQLite, Postgres fs.FS
}

func (s *Schema) name() string {
	if s == nil {
		return ""
	}
	return s.Name
}

func (s *Schema) versionTable() string { return "goose_" + s.Name + "_version" }

// Has says whether the store was opened with the named schema.
func (s *Store) Has(schema string) bool { return schema != "" && s.own == schema }

// Exec runs a statement of a business's own in the unit of work.
func (tx *Tx) Exec(query string, args ...any) (rowsAffected int64, err error) {
	return tx.exec(query, args...)
}

// QueryRow reads one row in the unit of work (sql.ErrNoRows from Scan when
// there is none).
func (tx *Tx) QueryRow(query string, args ...any) *sql.Row {
	return tx.db.Raw(query, args...).Row()
}

// QueryRow reads one row of a business's own tables, through a prepared
// statement kept for the next time (sql.ErrNoRows from Scan when there is
// none).
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	return s.readRow(ctx, query, args...)
}

// Query reads rows of a business's own tables; the caller closes them.
func (s *Store) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.db.WithContext(ctx).Raw(query, args...).Rows()
}
