package storage

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
)

// The audit search's index on SQLite. The audit page's text search ("q")
// looks for a piece of text anywhere in a call's arguments. PostgreSQL
// answers it from trigram indexes (migration 00002); SQLite from an FTS5
// table with the trigram tokenizer, which matches a phrase of three
// characters or more as a case-insensitive substring without reading every
// call.
//
// FTS5 is in the SQLite driver only when it is built with the sqlite_fts5
// tag (the Makefile, README and Dockerfile give it). The index is derived
// data, so it is not a migration: a binary with FTS5 makes it (and fills it
// from the calls there are) when it is missing or was left behind, and a
// binary without FTS5 takes its triggers away, so that its writes of calls
// cannot fail on a module it lacks, and searches by reading the calls. The
// search asks each time whether the index is kept (textIndexed), so it is
// never answered from an index that missed calls.
//
// tool_calls has no rowid (WITHOUT ROWID), so each version of a call's
// arguments gets a number in audit_text_keys, which is the FTS5 table's
// rowid: a trigger appends one in the transaction that records the call, and
// another when staff edit its arguments. That append is all the gate's calls
// pay; tokenizing them there cost about a third of its throughput
// (BENCHMARKS.md). The store's indexer (IndexText) puts the keys numbered
// since audit_text_state.indexed in the index a batch at a time, and a search
// reads those few calls directly. The table keeps no copy of the text
// (content=''), only what it needs to match. An edited call keeps its old
// key too, so the index may propose it for text it no longer holds: every
// call proposed is checked against its arguments with LIKE, so the search
// finds exactly what LIKE finds. Calls are never deleted.

// BuildTag is the build tag that puts FTS5 into the SQLite driver.
const BuildTag = "sqlite_fts5"

var textTriggers = []string{"audit_text_insert", "audit_text_update"}

var makeTextIndex = []string{
	`DROP TABLE IF EXISTS audit_text`,
	`DROP TABLE IF EXISTS audit_text_keys`,
	`DROP TABLE IF EXISTS audit_text_state`,
	`CREATE TABLE audit_text_keys (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL)`,
	`CREATE TABLE audit_text_state (id INTEGER PRIMARY KEY CHECK (id = 1), indexed INTEGER NOT NULL)`,
	`CREATE VIRTUAL TABLE audit_text USING fts5(args, raw_args, content='', tokenize='trigram')`,
	`INSERT INTO audit_text_keys (call_id) SELECT id FROM tool_calls ORDER BY created_at, id`,
	`INSERT INTO audit_text (rowid, args, raw_args)
		SELECT k.id, coalesce(c.args, ''), coalesce(c.raw_args, '') FROM audit_text_keys k JOIN tool_calls c ON c.id = k.call_id`,
	`INSERT INTO audit_text_state (id, indexed) SELECT 1, coalesce(max(id), 0) FROM audit_text_keys`,
	`CREATE TRIGGER audit_text_insert AFTER INSERT ON tool_calls BEGIN
		INSERT INTO audit_text_keys (call_id) VALUES (new.id);
	END`,
	`CREATE TRIGGER audit_text_update AFTER UPDATE OF args, raw_args ON tool_calls
	WHEN old.args IS NOT new.args OR old.raw_args IS NOT new.raw_args BEGIN
		INSERT INTO audit_text_keys (call_id) VALUES (new.id);
	END`,
}

// hasFTS5 says whether the SQLite driver was built with FTS5.
func hasFTS5(db *gorm.DB) (bool, error) {
	var on int
	err := db.Raw("SELECT sqlite_compileoption_used('ENABLE_FTS5')").Scan(&on).Error
	return on == 1, err
}

// textIndexed says whether the index is kept: every trigger is in place.
func textIndexed(db *gorm.DB) (bool, error) {
	var n int
	err := db.Raw(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN ?`, textTriggers).Scan(&n).Error
	return n == len(textTriggers), err
}

// keepTextIndex makes the index when this driver can keep it and it is not
// kept (new, or left behind by a binary without FTS5), in one transaction;
// without FTS5 it takes the triggers away. It says whether the index is kept.
func keepTextIndex(db *gorm.DB) (bool, error) {
	fts, err := hasFTS5(db)
	if err != nil {
		return false, err
	}
	kept, err := textIndexed(db)
	if err != nil || kept == fts {
		return kept, err
	}
	err = db.Transaction(func(tx *gorm.DB) error {
		if !fts {
			for _, t := range textTriggers {
				if err := tx.Exec("DROP TRIGGER IF EXISTS " + t).Error; err != nil {
					return err
				}
			}
			return nil
		}
		for _, stmt := range makeTextIndex {
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("make the audit search's index: %w", err)
			}
		}
		return nil
	})
	return fts && err == nil, err
}

// TextIndexed says whether the audit's text search has its index (always on
// PostgreSQL); without it a search reads the calls the other filters leave.
func (s *Store) TextIndexed() bool {
	if s.d.pg {
		return true
	}
	ok, _ := textIndexed(s.db)
	return ok
}

// textSearch keeps the calls whose arguments (normalized or as the model
// wrote them) hold text, case-insensitively, with LIKE (ILIKE on
// PostgreSQL, answered from its trigram indexes). On SQLite, for text of
// three characters or more while the index is kept, only the calls the index
// proposes (its phrase match, which the trigram tokenizer answers as a
// substring) and those numbered since it was last brought up to date are
// checked; else the calls the other filters leave.
func (s *Store) textSearch(db *gorm.DB, text string) *gorm.DB {
	like := "%" + escapeLike(text) + "%"
	op := s.d.like()
	db = db.Where(`(tool_calls.args `+op+` ? ESCAPE '\' OR tool_calls.raw_args `+op+` ? ESCAPE '\')`, like, like)
	if s.d.pg || utf8.RuneCountInString(text) < 3 {
		return db
	}
	if kept, err := textIndexed(s.db); err != nil || !kept {
		return db
	}
	phrase := `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
	return db.Where(`tool_calls.id IN (SELECT k.call_id FROM audit_text t JOIN audit_text_keys k ON k.id = t.rowid WHERE audit_text MATCH ?
		UNION ALL SELECT k.call_id FROM audit_text_keys k WHERE k.id > (SELECT indexed FROM audit_text_state))`, phrase)
}

// textIndexer brings the index up to date with the calls numbered since it
// last did, a batch per tick, through the writer, until the store closes.
type textIndexer struct {
	quit chan struct{}
	done chan struct{}
	stop sync.Once
}

// indexBatch is how many calls one write puts in the index: a few
// milliseconds of the writer's time, so that the gate's writes between
// batches barely wait; full batches follow each other without waiting for
// the next tick, so the indexer keeps up with the gate at full speed.
const indexBatch = 500

func (s *Store) startTextIndexer(every time.Duration) *textIndexer {
	ix := &textIndexer{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ix.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ix.quit:
				return
			case <-t.C:
				// A full batch means more wait: go on until none is full,
				// each batch a write of its own, so others write between.
				for {
					n, err := s.IndexText(context.Background())
					if err != nil || n < indexBatch {
						break
					}
					select {
					case <-ix.quit:
						return
					default:
					}
				}
			}
		}
	}()
	return ix
}

// close stops the indexer; closing a store twice closes it once.
func (ix *textIndexer) close() {
	if ix != nil {
		ix.stop.Do(func() { close(ix.quit) })
		<-ix.done
	}
}

// IndexText puts the calls numbered since the index was last brought up to
// date in it, a batch at most, and says how many it put (0 when there were
// none, or the index is not kept).
func (s *Store) IndexText(ctx context.Context) (int, error) {
	if s.d.pg {
		return 0, nil
	}
	var pending int
	err := s.db.WithContext(ctx).Raw(`SELECT count(*) FROM (SELECT 1 FROM audit_text_keys
		WHERE id > (SELECT indexed FROM audit_text_state) LIMIT 1)`).Scan(&pending).Error
	if err != nil || pending == 0 {
		return 0, nil // no index here (a build without FTS5 left it), or nothing new
	}
	var n int64
	err = s.Write(ctx, func(tx *Tx) error {
		var from int64
		if err := tx.db.Raw(`SELECT indexed FROM audit_text_state`).Scan(&from).Error; err != nil {
			return err
		}
		var to int64
		if err := tx.db.Raw(`SELECT coalesce(max(id), ?) FROM (SELECT id FROM audit_text_keys WHERE id > ? ORDER BY id LIMIT ?)`,
			from, from, indexBatch).Scan(&to).Error; err != nil {
			return err
		}
		// The arguments as they are now: a later edit has a key of its own.
		if _, err := tx.exec(`INSERT INTO audit_text (rowid, args, raw_args) SELECT k.id, coalesce(c.args, ''), coalesce(c.raw_args, '')
			FROM audit_text_keys k JOIN tool_calls c ON c.id = k.call_id WHERE k.id > ? AND k.id <= ?`, from, to); err != nil {
			return err
		}
		n = to - from
		_, err := tx.exec(`UPDATE audit_text_state SET indexed = ?`, to)
		return err
	})
	return int(n), err
}
