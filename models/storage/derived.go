package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// The tables the follower keeps (follow.go): the insights' counts by hour
// (call_hours, with call_counted: how each call is counted now) and the
// audit search's index (call_text on PostgreSQL, textindex.go on SQLite).
// Each can be made again from the calls (Rederive).

// counted is how call_hours counts a call.
type counted struct{ Hour, Tool, Rule, Decision, Outcome string }

// Outcome is how call_hours sums a call's status: an allowed or denied
// call by its decision; an approved call that then ran (or failed) as
// approved.
func Outcome(decision string, status models.CallStatus) string {
	switch decision {
	case string(models.DecidedAllow):
		return "allowed"
	case string(models.DecidedDeny):
		return "denied"
	case string(models.DecidedNeedsApproval):
		switch status {
		case models.CallApproved, models.CallExecuting, models.CallSucceeded, models.CallFailed, models.CallUnknown:
			return "approved"
		}
	}
	return string(status)
}

// countCalls brings call_hours up to date for the calls: each call's
// count moves from what it was last counted as to what it is now.
func countCalls(db *gorm.DB, ids []string) error {
	delta := map[counted]int64{}
	var moved []any
	for part := range slices.Chunk(ids, 500) {
		var err error
		if moved, err = recount(db, part, delta, moved); err != nil {
			return err
		}
	}
	if len(moved) == 0 {
		return nil
	}
	if err := addHours(db, delta); err != nil {
		return err
	}
	for rows := range slices.Chunk(moved, 6*500) {
		if err := db.Exec(`INSERT INTO call_counted (call_id, hour, tool, rule, decision, outcome) VALUES `+rowsOf(len(rows)/6, 6)+`
			ON CONFLICT (call_id) DO UPDATE SET hour = excluded.hour, tool = excluded.tool, rule = excluded.rule,
			decision = excluded.decision, outcome = excluded.outcome`, rows...).Error; err != nil {
			return err
		}
	}
	return nil
}

// recount adds to delta how the calls' counts move, and to moved the rows
// of call_counted that change.
func recount(db *gorm.DB, ids []string, delta map[counted]int64, moved []any) ([]any, error) {
	var now []struct {
		ID, Tool, Rule, Decision string
		Status                   models.CallStatus
		CreatedAt                time.Time
	}
	if err := db.Raw(`SELECT id, tool, rule, decision, status, created_at FROM tool_calls WHERE id IN ?`, ids).Scan(&now).Error; err != nil {
		return nil, err
	}
	var was []models.CallCounted
	if err := db.Raw(`SELECT call_id, hour, tool, rule, decision, outcome FROM call_counted WHERE call_id IN ?`, ids).Scan(&was).Error; err != nil {
		return nil, err
	}
	before := make(map[string]counted, len(was))
	for _, w := range was {
		before[w.CallID] = counted{w.Hour, w.Tool, w.Rule, w.Decision, w.Outcome}
	}
	for _, c := range now {
		is := counted{c.CreatedAt.UTC().Format(HourFormat), c.Tool, c.Rule, c.Decision, Outcome(c.Decision, c.Status)}
		old, ok := before[c.ID]
		if ok && old == is {
			continue
		}
		if ok {
			delta[old]--
		}
		delta[is]++
		moved = append(moved, c.ID, is.Hour, is.Tool, is.Rule, is.Decision, is.Outcome)
	}
	return moved, nil
}

// addHours adds the changes to call_hours, in one statement, in the order
// of their keys (two followers of different chains take rows in turn).
func addHours(db *gorm.DB, delta map[counted]int64) error {
	keys := make([]counted, 0, len(delta))
	for k, n := range delta {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.SortFunc(keys, func(a, b counted) int {
		return strings.Compare(a.Hour+"\x00"+a.Tool+"\x00"+a.Rule+"\x00"+a.Decision+"\x00"+a.Outcome,
			b.Hour+"\x00"+b.Tool+"\x00"+b.Rule+"\x00"+b.Decision+"\x00"+b.Outcome)
	})
	for part := range slices.Chunk(keys, 500) {
		args := make([]any, 0, 6*len(part))
		for _, k := range part {
			args = append(args, k.Hour, k.Tool, k.Rule, k.Decision, k.Outcome, delta[k])
		}
		if err := db.Exec(`INSERT INTO call_hours (hour, tool, rule, decision, outcome, n) VALUES `+rowsOf(len(part), 6)+`
			ON CONFLICT (hour, tool, rule, decision, outcome) DO UPDATE SET n = call_hours.n + excluded.n`, args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// rowsOf is n rows of k placeholders each, for a multi-row VALUES.
func rowsOf(n, k int) string {
	row := "(?" + strings.Repeat(", ?", k-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// keepCallText puts the calls' arguments as they are now in the search's
// table (PostgreSQL: call_text, with trigram indexes), once per version.
func keepCallText(db *gorm.DB, ids []string) error {
	for part := range slices.Chunk(ids, 500) {
		if err := db.Exec(`INSERT INTO call_text (call_id, args_hash, args, raw_args)
			SELECT id, COALESCE(args_hash, ''), COALESCE(args, ''), COALESCE(raw_args, '') FROM tool_calls WHERE id IN ? ORDER BY created_at, id
			ON CONFLICT (call_id, args_hash) DO NOTHING`, part).Error; err != nil {
			return err
		}
	}
	return nil
}

// outcomeSQL is Outcome in SQL, over a call's decision and status.
const outcomeSQL = `(CASE decision WHEN 'allow' THEN 'allowed' WHEN 'deny' THEN 'denied' WHEN 'needs_approval' THEN (CASE WHEN status IN
	('approved', 'executing', 'succeeded', 'failed', 'unknown') THEN 'approved' ELSE COALESCE(status, '') END) ELSE COALESCE(status, '') END)`

// Rederive makes every derived table again from the calls, and marks them
// followed up to every chain's head: for calls written past the store (a
// benchmark's seed, a restore of the calls alone), which no event names.
func (s *Store) Rederive(ctx context.Context) error {
	hour := `substr(created_at, 1, 13)`
	if s.d.pg {
		hour = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24')`
	}
	steps := []string{
		`DELETE FROM call_counted`,
		`INSERT INTO call_counted (call_id, hour, tool, rule, decision, outcome) SELECT id, ` + hour +
			`, COALESCE(tool, ''), COALESCE(rule, ''), COALESCE(decision, ''), ` + outcomeSQL + ` FROM tool_calls`,
		`DELETE FROM call_hours`,
		`INSERT INTO call_hours (hour, tool, rule, decision, outcome, n) SELECT hour, tool, rule, decision, outcome, count(*)
			FROM call_counted GROUP BY hour, tool, rule, decision, outcome`,
	}
	names := []string{markHours}
	switch {
	case s.d.pg:
		steps = append(steps, `DELETE FROM call_text`, `INSERT INTO call_text (call_id, args_hash, args, raw_args)
			SELECT id, COALESCE(args_hash, ''), COALESCE(args, ''), COALESCE(raw_args, '') FROM tool_calls ORDER BY created_at, id`)
		names = append(names, markText)
	case s.textKept:
		steps = append(steps, makeTextIndex...)
		names = append(names, markText)
	}
	for _, name := range names {
		steps = append(steps, `INSERT INTO derived_marks (name, chain, seq, caught_up_at) SELECT '`+name+`', chain, seq, ?
			FROM audit_heads WHERE 1 = 1 ON CONFLICT (name, chain) DO UPDATE SET seq = excluded.seq, caught_up_at = excluded.caught_up_at`)
	}
	run := func(db *gorm.DB) error {
		for _, q := range steps {
			var args []any
			if strings.Contains(q, "caught_up_at = excluded") {
				args = []any{s.now()}
			}
			if err := db.Exec(q, args...).Error; err != nil {
				return fmt.Errorf("make the derived data again: %w", err)
			}
		}
		return nil
	}
	if s.d.pg {
		return s.db.WithContext(ctx).Transaction(run)
	}
	return s.Write(ctx, func(tx *Tx) error { return run(tx.db) })
}
