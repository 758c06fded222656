package storage

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The audit search's index. The audit page's text search ("q") looks for a
// piece of text anywhere in a call's arguments (normalized or as the model
// wrote them), case-insensitively. It is derived data, kept by the
// follower (follow.go), not in the call's transaction: every version of a
// call's arguments is put in the index once, after it is committed.
//
//   - PostgreSQL: call_text holds each version with trigram indexes
//     (migration 00024), which answer ILIKE without reading every call.
//   - SQLite: an FTS5 table with the trigram tokenizer, which matches a
//     phrase of three characters or more as a case-insensitive substring.
//     It keeps no copy of the text (content=''), only what it needs to
//     match; audit_text_keys numbers each version (the FTS5 rowid).
//
// FTS5 is in the SQLite driver only when it is built with the sqlite_fts5
// tag (the Makefile, README and Dockerfile give it). The FTS5 table is not
// a migration: a binary with FTS5 makes it (and fills it from the calls
// there are) when it is missing or of the layout before the follower; a
// binary without FTS5 leaves it be and searches by reading the calls, and
// the index takes up from its mark when a binary with FTS5 runs again.
//
// A search is never answered from an index that missed calls: the calls
// named by events the follower has not read yet are checked directly, and
// every call the index proposes is checked against its arguments with LIKE
// (an edited call keeps its old version in the index), so the search finds
// exactly what LIKE finds. Calls are never deleted.

// BuildTag is the build tag that puts FTS5 into the SQLite driver.
const BuildTag = "sqlite_fts5"

var makeTextIndex = []string{
	`DROP TRIGGER IF EXISTS audit_text_insert`,
	`DROP TRIGGER IF EXISTS audit_text_update`,
	`DROP TABLE IF EXISTS audit_text`,
	`DROP TABLE IF EXISTS audit_text_keys`,
	`DROP TABLE IF EXISTS audit_text_state`,
	`CREATE TABLE audit_text_keys (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL, args_hash TEXT NOT NULL,
		UNIQUE (call_id, args_hash))`,
	`CREATE VIRTUAL TABLE audit_text USING fts5(args, raw_args, content='', tokenize='trigram')`,
	`INSERT INTO audit_text_keys (call_id, args_hash) SELECT id, coalesce(args_hash, '') FROM tool_calls ORDER BY created_at, id`,
	`INSERT INTO audit_text (rowid, args, raw_args)
		SELECT k.id, coalesce(c.args, ''), coalesce(c.raw_args, '') FROM audit_text_keys k JOIN tool_calls c ON c.id = k.call_id`,
	// What it holds is every call up to the chain's head.
	`INSERT INTO derived_marks (name, chain, seq) SELECT '` + markText + `', chain, seq FROM audit_heads WHERE 1 = 1
		ON CONFLICT (name, chain) DO UPDATE SET seq = excluded.seq`,
}

// hasFTS5 says whether the SQLite driver was built with FTS5.
func hasFTS5(db *gorm.DB) (bool, error) {
	var on int
	err := db.Raw("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on).Error
	return on == 1, err
}

// keepTextIndex makes the index when this driver can keep it and it is
// missing or of the old layout, in one transaction. It says whether the
// index is kept.
func keepTextIndex(db *gorm.DB) (bool, error) {
	fts, err := hasFTS5(db)
	if err != nil || !fts {
		return false, err
	}
	var current int
	err = db.Raw(`SELECT count(*) FROM pragma_table_info('audit_text_keys') WHERE name = 'args_hash'`).Scan(&current).Error
	if err != nil || current == 1 {
		return current == 1, err
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		for _, stmt := range makeTextIndex {
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("make the audit search's index: %w", err)
			}
		}
		return nil
	})
	return err == nil, err
}

// TextIndexed says whether the audit's text search has its index (always on
// PostgreSQL); without it a search reads the calls the other filters leave.
func (s *Store) TextIndexed() bool { return s.d.pg || s.textKept }

// textSearch keeps the calls whose arguments (normalized or as the model
// wrote them) hold text, case-insensitively, with LIKE (ILIKE on
// PostgreSQL). For text of three characters or more, with an index, only
// the calls the index proposes and those the follower has not read yet are
// checked; else the calls the other filters leave.
func (s *Store) textSearch(db *gorm.DB, text string) *gorm.DB {
	like := "%" + escapeLike(text) + "%"
	op := s.d.like()
	db = db.Where(`(tool_calls.args `+op+` ? ESCAPE '\' OR tool_calls.raw_args `+op+` ? ESCAPE '\')`, like, like)
	if !s.TextIndexed() || utf8.RuneCountInString(text) < 3 {
		return db
	}
	behind, behindArgs, err := s.unfollowed(s.db.WithContext(db.Statement.Context), markText)
	if err != nil {
		db.AddError(err) // the query fails with it
		return db
	}
	if s.d.pg {
		return db.Where(`tool_calls.id IN (SELECT call_id FROM call_text WHERE args ILIKE ? ESCAPE '\' OR raw_args ILIKE ? ESCAPE '\'
			UNION ALL `+behind+`)`, append([]any{like, like}, behindArgs...)...)
	}
	phrase := `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
	return db.Where(`tool_calls.id IN (SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH ?
		UNION ALL `+behind+`)`, append([]any{phrase}, behindArgs...)...)
}

// keepAuditText puts the calls' arguments as they are now in SQLite's FTS5
// index, once per version.
func keepAuditText(db *gorm.DB, ids []string) error {
	var last int64
	if err := db.Raw(`SELECT coalesce(max(id), 0) FROM audit_text_keys`).Scan(&last).Error; err != nil {
		return err
	}
	for part := range slices.Chunk(ids, 500) {
		if err := db.Exec(`INSERT OR IGNORE INTO audit_text_keys (call_id, args_hash)
			SELECT id, coalesce(args_hash, '') FROM tool_calls WHERE id IN ? ORDER BY created_at, id`, part).Error; err != nil {
			return err
		}
	}
	return db.Exec(`INSERT INTO audit_text (rowid, args, raw_args) SELECT k.id, coalesce(c.args, ''), coalesce(c.raw_args, '')
		FROM audit_text_keys k JOIN tool_calls c ON c.id = k.call_id WHERE k.id > ?`, last).Error
}
