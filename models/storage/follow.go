package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// Derived data follows the audit log. What can be rebuilt from the calls
// (the insights' counts by hour, call_hours; the audit search's index,
// textindex.go) is not kept by triggers in the call's transaction, which
// every call would pay for: a follower (Follow, run by the core a few times
// a second) reads the events committed since it last did, chain by chain,
// and brings each derived table up to date for the calls those events name,
// in a transaction of its own that also moves its mark (derived_marks:
// one row per derived table and chain). A restart, a crash or a second
// instance takes up from the marks; on PostgreSQL two instances never
// follow one chain at once (the marks are locked, SKIP LOCKED).
//
// Why a mark is enough: a chain's events are committed in the order of
// their numbers (on PostgreSQL the head's row lock is held from the first
// event to the commit; SQLite has one writer), so once event N is visible
// every event before it is too, and nothing is ever committed behind a
// mark. Every change of a call's status or arguments appends an event
// about the call in the same unit of work, so the follower hears of every
// change. What it does with a call is idempotent: it compares the call as
// it is now with what it last counted (call_counted) or indexed (the
// version of its arguments), so a call named twice is counted once.
//
// Nothing a decision depends on is here: the policy's history aggregates
// and the intent rules read the calls in the decision's transaction.

// followBatch is how many events of one chain one pass reads: a few
// milliseconds of work, so that on SQLite the gate's writes between passes
// barely wait.
const followBatch = 1000

// The derived tables, as derived_marks names them.
const (
	markHours = "call_hours"
	markText  = "call_text"
)

// follower keeps one derived table: apply brings it up to date for the
// calls named.
type follower struct {
	name  string
	apply func(db *gorm.DB, calls []string) error
}

func (s *Store) followers() []follower {
	out := []follower{{markHours, countCalls}}
	switch {
	case s.d.pg:
		out = append(out, follower{markText, keepCallText})
	case s.textKept:
		out = append(out, follower{markText, keepAuditText})
	}
	return out
}

// Follow brings every derived table up to date with the audit log, a batch
// of events per chain at most, and says whether there is more to read.
func (s *Store) Follow(ctx context.Context) (more bool, err error) {
	for _, f := range s.followers() {
		n, err := s.followOnce(ctx, f)
		if err != nil {
			return false, fmt.Errorf("follow the audit log for %s: %w", f.name, err)
		}
		more = more || n == followBatch
	}
	return more, nil
}

// FollowAll follows until the derived data has caught up with what was
// committed when it began (tests, benchmarks).
func (s *Store) FollowAll(ctx context.Context) error {
	for {
		more, err := s.Follow(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// followOnce is one pass of one follower, in a transaction of its own: on
// PostgreSQL apart from the writer, whose batches hold a chain's head.
func (s *Store) followOnce(ctx context.Context, f follower) (int, error) {
	var most int
	pass := func(db *gorm.DB) error {
		var err error
		most, err = s.followPass(db, f)
		return err
	}
	if s.d.pg {
		return most, s.db.WithContext(ctx).Transaction(pass)
	}
	return most, s.Write(ctx, func(tx *Tx) error { return pass(tx.db) })
}

// followPass reads each chain's events past the follower's mark, applies
// them and moves the marks; when every chain was read to its end, they are
// caught up now.
func (s *Store) followPass(db *gorm.DB, f follower) (int, error) {
	// A chain begun since the last pass is followed from its start.
	if err := db.Exec(`INSERT INTO derived_marks (name, chain, seq) SELECT ?, chain, 0 FROM audit_heads WHERE 1 = 1
		ON CONFLICT (name, chain) DO NOTHING`, f.name).Error; err != nil {
		return 0, err
	}
	lock := ""
	if s.d.pg {
		lock = " FOR UPDATE SKIP LOCKED" // another instance follows it now
	}
	var marks []struct{ Chain, Seq int64 }
	if err := db.Raw(`SELECT chain, seq FROM derived_marks WHERE name = ? ORDER BY chain`+lock, f.name).Scan(&marks).Error; err != nil {
		return 0, err
	}
	now, most, caughtUp := s.now(), 0, true
	// Every chain's calls are applied together, so that the rows of a
	// derived table are taken in one order (two instances' followers of
	// other chains cannot deadlock).
	var calls []string
	named := map[string]bool{}
	type moved struct{ chain, to int64 }
	var moves []moved
	for _, m := range marks {
		var events []struct {
			Seq     int64
			Kind    models.EventKind
			Subject string
		}
		if err := db.Raw(`SELECT seq, kind, subject FROM audit_events WHERE chain = ? AND seq > ? ORDER BY seq LIMIT ?`,
			m.Chain, m.Seq, followBatch).Scan(&events).Error; err != nil {
			return 0, err
		}
		for _, e := range events {
			if e.Kind.AboutCall() && !named[e.Subject] {
				named[e.Subject] = true
				calls = append(calls, e.Subject)
			}
		}
		to := m.Seq
		if len(events) > 0 {
			to = events[len(events)-1].Seq
		}
		moves = append(moves, moved{m.Chain, to})
		most = max(most, len(events))
		if len(events) == followBatch {
			caughtUp = false
		}
	}
	if len(calls) > 0 {
		if err := f.apply(db, calls); err != nil {
			return 0, err
		}
	}
	for _, m := range moves {
		set, args := "seq = ?", []any{m.to}
		if caughtUp {
			set, args = set+", caught_up_at = ?", append(args, now)
		}
		if err := db.Exec(`UPDATE derived_marks SET `+set+` WHERE name = ? AND chain = ?`, append(args, f.name, m.chain)...).Error; err != nil {
			return 0, err
		}
	}
	return most, nil
}

// unfollowed is a query of the ids of the calls named by events the
// follower name has not read yet, on every chain: a range of each chain's
// key, past its mark.
func (s *Store) unfollowed(db *gorm.DB, name string) (string, []any, error) {
	var marks []struct{ Chain, Seq int64 }
	if err := db.Raw(`SELECT h.chain, COALESCE(m.seq, 0) AS seq FROM audit_heads h
		LEFT JOIN derived_marks m ON m.name = ? AND m.chain = h.chain ORDER BY h.chain`, name).Scan(&marks).Error; err != nil {
		return "", nil, fmt.Errorf("read how far %s has followed the audit log: %w", name, err)
	}
	if len(marks) == 0 {
		return `SELECT subject FROM audit_events WHERE 1 = 0`, nil, nil
	}
	var where []string
	var args []any
	for _, m := range marks {
		where = append(where, "(chain = ? AND seq > ?)")
		args = append(args, m.Chain, m.Seq)
	}
	return `SELECT subject FROM audit_events WHERE ` + strings.Join(where, " OR "), args, nil
}

// FollowedAt is when the derived table name had last read every chain to
// its end: what it shows counts every call changed before then. The zero
// time: a chain it has never read to the end.
func (s *Store) FollowedAt(ctx context.Context, name string) (time.Time, error) {
	var rows []struct {
		Chain      int64
		CaughtUpAt *time.Time
	}
	err := s.db.WithContext(ctx).Raw(`SELECT h.chain, m.caught_up_at FROM audit_heads h
		LEFT JOIN derived_marks m ON m.name = ? AND m.chain = h.chain`, name).Scan(&rows).Error
	if err != nil {
		return time.Time{}, fmt.Errorf("read how far %s has followed the audit log: %w", name, err)
	}
	var oldest time.Time
	for i, r := range rows {
		if r.CaughtUpAt == nil {
			return time.Time{}, nil
		}
		if i == 0 || r.CaughtUpAt.Before(oldest) {
			oldest = *r.CaughtUpAt
		}
	}
	if len(rows) == 0 {
		return s.now(), nil // nothing recorded yet: nothing to follow
	}
	return oldest.UTC(), nil
}

// HoursCountedAt is FollowedAt for the insights' counts by hour.
func (s *Store) HoursCountedAt(ctx context.Context) (time.Time, error) {
	return s.FollowedAt(ctx, markHours)
}
