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
// of events per chain at most, and says whether there is more to read. When
// nothing is new it costs one read; else one transaction for every table.
func (s *Store) Follow(ctx context.Context) (more bool, err error) {
	fs := s.followers()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	st, err := s.followState(s.db.WithContext(ctx), names)
	if err != nil || !st.behind {
		return false, err
	}
	pass := func(db *gorm.DB) error {
		var err error
		more, err = s.followPass(db, fs, names, st.unmarked)
		return err
	}
	if s.d.pg {
		err = s.db.WithContext(ctx).Transaction(pass)
	} else {
		err = s.Write(ctx, func(tx *Tx) error { return pass(tx.db) })
	}
	if err != nil {
		return false, fmt.Errorf("follow the audit log: %w", err)
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

// followState is where the derived tables stand against the chains' heads,
// in one read: whether any is behind, whether a chain has no mark yet, and
// as of when the oldest has read everything (the zero time: never).
type followState struct {
	behind, unmarked bool
	fresh            time.Time
}

func (s *Store) followState(db *gorm.DB, names []string) (followState, error) {
	var rows []struct {
		Chain, Head int64
		Name        *string
		Seq         int64
		CaughtUpAt  *time.Time
	}
	err := db.Raw(`SELECT h.chain, h.seq AS head, m.name, COALESCE(m.seq, 0) AS seq, m.caught_up_at FROM audit_heads h
		LEFT JOIN derived_marks m ON m.chain = h.chain AND m.name IN ?`, names).Scan(&rows).Error
	if err != nil {
		return followState{}, fmt.Errorf("read how far the derived data has followed the audit log: %w", err)
	}
	now := s.now()
	st := followState{fresh: now}
	marked := map[int64]int{}
	for _, r := range rows {
		if r.Name == nil {
			st.behind, st.unmarked, st.fresh = st.behind || r.Head > 0, true, time.Time{}
			continue
		}
		marked[r.Chain]++
		switch {
		case r.Seq >= r.Head: // read to its head as of this read
		case r.CaughtUpAt == nil:
			st.behind, st.fresh = true, time.Time{}
		default:
			st.behind = true
			if !st.fresh.IsZero() && r.CaughtUpAt.Before(st.fresh) {
				st.fresh = r.CaughtUpAt.UTC()
			}
		}
	}
	for _, n := range marked {
		if n < len(names) { // a table with no mark on this chain
			st.behind, st.unmarked, st.fresh = true, true, time.Time{}
		}
	}
	return st, nil
}

// followPass reads each chain's events past the marks, applies them to
// every derived table and moves the marks; when every chain was read to its
// end, the tables are caught up now. Every chain's calls are applied
// together, so that the rows of a derived table are taken in one order (two
// instances' followers of other chains cannot deadlock).
func (s *Store) followPass(db *gorm.DB, fs []follower, names []string, unmarked bool) (more bool, err error) {
	if unmarked { // a chain begun since is followed from its start
		for _, name := range names {
			if err := db.Exec(`INSERT INTO derived_marks (name, chain, seq) SELECT ?, chain, 0 FROM audit_heads WHERE 1 = 1
				ON CONFLICT (name, chain) DO NOTHING`, name).Error; err != nil {
				return false, err
			}
		}
	}
	lock := ""
	if s.d.pg {
		lock = " FOR UPDATE SKIP LOCKED" // another instance follows it now
	}
	var marks []mark
	if err := db.Raw(`SELECT name, chain, seq FROM derived_marks WHERE name IN ? ORDER BY chain, name`+lock, names).Scan(&marks).Error; err != nil {
		return false, err
	}
	from := map[int64]int64{} // each chain is read once, from its lowest mark
	var chains []int64
	for _, m := range marks {
		if f, ok := from[m.Chain]; !ok || m.Seq < f {
			if !ok {
				chains = append(chains, m.Chain)
			}
			from[m.Chain] = m.Seq
		}
	}
	calls := make(map[string][]string, len(fs))
	named := make(map[string]map[string]bool, len(fs))
	to := map[int64]int64{}
	for _, chain := range chains {
		seq := from[chain]
		events, err := eventsPast(db, chain, seq)
		if err != nil {
			return false, err
		}
		to[chain] = seq
		if len(events) > 0 {
			to[chain] = events[len(events)-1].Seq
		}
		more = more || len(events) == followBatch
		for _, m := range marks {
			if m.Chain != chain {
				continue
			}
			for _, e := range events {
				if e.Seq > m.Seq && e.Kind.AboutCall() && !named[m.Name][e.Subject] {
					if named[m.Name] == nil {
						named[m.Name] = map[string]bool{}
					}
					named[m.Name][e.Subject] = true
					calls[m.Name] = append(calls[m.Name], e.Subject)
				}
			}
		}
	}
	for _, f := range fs {
		if len(calls[f.name]) > 0 {
			if err := f.apply(db, calls[f.name]); err != nil {
				return false, fmt.Errorf("%s: %w", f.name, err)
			}
		}
	}
	return more, s.moveMarks(db, marks, to, !more)
}

// eventsPast is a batch of one chain's events after seq.
func eventsPast(db *gorm.DB, chain, seq int64) ([]followed, error) {
	var events []followed
	err := db.Raw(`SELECT seq, kind, subject FROM audit_events WHERE chain = ? AND seq > ? ORDER BY seq LIMIT ?`,
		chain, seq, followBatch).Scan(&events).Error
	return events, err
}

// mark is how far one derived table has read one chain.
type mark struct {
	Name       string
	Chain, Seq int64
}

// followed is what the follower reads of an event.
type followed struct {
	Seq     int64
	Kind    models.EventKind
	Subject string
}

// moveMarks moves every mark read to where its chain was read to, in one
// statement per chain.
func (s *Store) moveMarks(db *gorm.DB, marks []mark, to map[int64]int64, caughtUp bool) error {
	byChain := map[int64][]string{}
	var chains []int64
	for _, m := range marks {
		if byChain[m.Chain] == nil {
			chains = append(chains, m.Chain)
		}
		byChain[m.Chain] = append(byChain[m.Chain], m.Name)
	}
	for _, chain := range chains {
		set, args := "seq = ?", []any{to[chain]}
		if caughtUp {
			set, args = set+", caught_up_at = ?", append(args, s.now())
		}
		if err := db.Exec(`UPDATE derived_marks SET `+set+` WHERE chain = ? AND name IN ?`, append(args, chain, byChain[chain])...).Error; err != nil {
			return err
		}
	}
	return nil
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

// HoursCountedAt is as of when the insights' counts by hour had read every
// chain: they count every call changed before then. The zero time: a chain
// they have never read to the end.
func (s *Store) HoursCountedAt(ctx context.Context) (time.Time, error) {
	st, err := s.followState(s.db.WithContext(ctx), []string{markHours})
	return st.fresh, err
}
