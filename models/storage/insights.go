package storage

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/countersign/countersign/models"
	"golang.org/x/sync/errgroup"
)

// The rows the insights (agent/insights) are summed from: the calls and
// the approvals, read with indexes of their own (idx_tool_calls_insights,
// idx_approvals_created) on the report pool, so that a page over a million
// calls stays fast and never takes the gate's connections.

// InsightsQuery chooses the calls: made since Since, of one tool when Tool
// is given, split into bands of the numeric argument Field at Bands (50,
// 200 gives "under 50", "50 to 200", "200 and over", besides "no amount").
type InsightsQuery struct {
	Since time.Time
	Tool  string
	Field string
	Bands []float64
}

// InsightCount is how many calls of one tool and rule (in one band) were
// decided one way and are now in one status.
type InsightCount struct {
	Tool, Rule, Band string
	Decision         string
	Status           models.CallStatus
	N                int64
}

// HourFormat is how call_hours names an hour (UTC).
const HourFormat = "2006-01-02 15"

// InsightCounts counts the calls the query chooses. Without bands: the
// hours wholly in the period from call_hours (where an approved call's
// outcome is "approved"), and the calls of the hour it starts in. With
// bands, every call's arguments are read.
func (s *Store) InsightCounts(ctx context.Context, q InsightsQuery) ([]InsightCount, error) {
	since := q.Since.UTC()
	band, bandArgs := s.d.bandOf("args", q.Field, q.Bands)
	var counts string
	var countArgs []any
	if len(bandArgs) > 0 {
		where, whereArgs := "created_at >= ?", []any{since}
		if q.Tool != "" {
			where, whereArgs = "tool = ? AND "+where, []any{q.Tool, since}
		}
		counts, countArgs = `SELECT tool, rule, decision, status, `+band+` AS band, COUNT(*) FROM tool_calls WHERE `+where+
			` GROUP BY tool, rule, decision, status, band`, append(bandArgs, whereArgs...)
	} else {
		next := since.Truncate(time.Hour).Add(time.Hour)
		hours := `SELECT tool, rule, decision, outcome, '', SUM(n) FROM call_hours WHERE hour >= ?`
		hourArgs := []any{next.Format(HourFormat)}
		partial := `SELECT tool, rule, decision, status, '', COUNT(*) FROM tool_calls WHERE created_at >= ? AND created_at < ?`
		partialArgs := []any{since, next}
		if q.Tool != "" {
			hours, hourArgs = hours+" AND tool = ?", append(hourArgs, q.Tool)
			partial, partialArgs = partial+" AND tool = ?", append(partialArgs, q.Tool)
		}
		counts = hours + ` GROUP BY tool, rule, decision, outcome UNION ALL ` + partial + ` GROUP BY tool, rule, decision, status`
		countArgs = append(hourArgs, partialArgs...)
	}
	rows, err := s.reports.WithContext(ctx).Raw(counts, countArgs...).Rows()
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	defer rows.Close()
	var out []InsightCount
	for rows.Next() {
		var c InsightCount
		if err := rows.Scan(&c.Tool, &c.Rule, &c.Decision, &c.Status, &c.Band, &c.N); err != nil {
			return nil, fmt.Errorf("insights: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	return out, nil
}

// Verdict is one verdict given in the period, as the insights read it:
// with its call's tool, rule and band, how long its person took, and (for
// the verdict that settled the call) how long the call waited in all.
type Verdict struct {
	StaffID, Verdict string
	Edited           bool
	Tool, Rule, Band string
	TookS            float64
	SettledS         *float64
}

// InsightVerdicts reads the verdicts given in the period the query
// chooses, summed in whole seconds (Approval.TookS, .SettledS), so that
// without bands no call is read. They are many (a sixth of the calls,
// say): the period is read in parts at once, one per report connection
// (ReportConns). part(i) is asked first, for every part, for the function
// part i's verdicts go to; each is called from its part's goroutine only.
func (s *Store) InsightVerdicts(ctx context.Context, q InsightsQuery, part func(i int) func(Verdict)) error {
	since := q.Since.UTC()
	from, fromArgs, bandCol := "approvals WHERE created_at >= ?", []any{since}, "''"
	if len(q.Bands) > 0 && q.Field != "" {
		aband, abandArgs := s.d.bandOf("c.args", q.Field, q.Bands)
		from = "(SELECT a.staff_id, a.verdict, a.edited, a.tool, a.rule, a.took_s, a.settled_s, a.created_at, " + aband +
			" AS band FROM approvals a JOIN tool_calls c ON c.id = a.tool_call_id) x WHERE created_at >= ?"
		fromArgs, bandCol = append(abandArgs, since), "band"
	}
	if q.Tool != "" {
		from, fromArgs = from+" AND tool = ?", append(fromArgs, q.Tool)
	}
	parts := verdictSlices(since, s.now(), min(runtime.GOMAXPROCS(0), ReportConns))
	each := make([]func(Verdict), len(parts))
	for i := range parts {
		each[i] = part(i)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, p := range parts {
		g.Go(func() error { return s.readVerdicts(gctx, from, fromArgs, bandCol, p, each[i]) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("insights of approvals: %w", err)
	}
	return nil
}

// verdictSlices cuts [from, to) in n slices; the last is open-ended.
func verdictSlices(from, to time.Time, n int) [][2]time.Time {
	n = max(n, 1)
	step := to.Sub(from) / time.Duration(n)
	out := make([][2]time.Time, n)
	for i := range out {
		out[i] = [2]time.Time{from.Add(time.Duration(i) * step), from.Add(time.Duration(i+1) * step)}
	}
	out[n-1][1] = time.Time{}
	return out
}

// readVerdicts reads the verdicts of one slice of the period.
func (s *Store) readVerdicts(ctx context.Context, from string, args []any, bandCol string, part [2]time.Time, each func(Verdict)) error {
	args = append([]any{}, args...)
	for i, a := range args { // the period's start is the slice's
		if _, ok := a.(time.Time); ok {
			args[i] = part[0]
			break
		}
	}
	if !part[1].IsZero() {
		from, args = from+" AND created_at < ?", append(args, part[1])
	}
	rows, err := s.reports.WithContext(ctx).Raw(`SELECT staff_id, verdict, edited, tool, rule, `+bandCol+`, took_s, settled_s FROM `+from, args...).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v Verdict
		if err := rows.Scan(&v.StaffID, &v.Verdict, &v.Edited, &v.Tool, &v.Rule, &v.Band, &v.TookS, &v.SettledS); err != nil {
			return err
		}
		each(v)
	}
	return rows.Err()
}

// ApproverNames are the names of the people who gave verdicts, by id: as
// the staff list has them, else (Slack, an account gone) as their last
// verdict kept them, else the id.
func (s *Store) ApproverNames(ctx context.Context, ids []string) (map[string]string, error) {
	names := map[string]string{}
	var staff []models.Staff
	if err := s.db.WithContext(ctx).Select("id", "name").Find(&staff).Error; err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	for _, st := range staff {
		names[st.ID] = st.Name
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if n := names[id]; n != "" {
			out[id] = n
			continue
		}
		var last []models.Approval
		if err := s.db.WithContext(ctx).Select("staff_name").Where("staff_id = ?", id).Order("id DESC").Limit(1).Find(&last).Error; err != nil {
			return nil, fmt.Errorf("insights: %w", err)
		}
		if out[id] = id; len(last) > 0 && last[0].StaffName != "" {
			out[id] = last[0].StaffName
		}
	}
	return out, nil
}

// bandOf is SQL naming the band of a numeric top-level argument, with its
// values: ” when there are no bands.
func (d dialect) bandOf(col, field string, bands []float64) (string, []any) {
	if field == "" || len(bands) == 0 {
		return "''", nil
	}
	val := "json_extract(" + col + ", ?)"
	isNum := "json_type(" + col + ", ?) IN ('integer', 'real')"
	key := "$." + field
	if d.pg {
		val = "CAST(" + col + "::jsonb ->> ? AS double precision)"
		isNum = "jsonb_typeof(" + col + "::jsonb -> ?) = 'number'"
		key = field
	}
	sql := "CASE WHEN NOT (" + isNum + ") THEN 'no " + safeName(field) + "'"
	args := []any{key}
	for i, b := range bands {
		sql += " WHEN " + val + " < ? THEN '" + BandLabel(bands, i) + "'"
		args = append(args, key, b)
	}
	sql += " ELSE '" + BandLabel(bands, len(bands)) + "' END"
	return sql, args
}

// BandLabel names band i of the bounds: "under 50", "50 to 200", "200 and
// over".
func BandLabel(bounds []float64, i int) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	switch {
	case i == 0:
		return "under " + f(bounds[0])
	case i >= len(bounds):
		return f(bounds[len(bounds)-1]) + " and over"
	}
	return f(bounds[i-1]) + " to " + f(bounds[i])
}

// safeName keeps a field name to the letters, digits and underscores a
// policy allows, for a label written into SQL.
func safeName(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < 64; i++ {
		if c := s[i]; c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}

// HeldCall is one call a rule held, for suggestions: its arguments as the
// agent asked, and how it went.
type HeldCall struct {
	ID           string
	Args         string // as asked (before an edit)
	Edited       bool
	Status       models.CallStatus
	CreatedAt    time.Time
	FinalArgs    string
	DecidedAfter float64 // seconds, -1 when not decided by people
}

// HeldCalls are the calls of a tool that a rule held since a time, oldest
// first, at most limit.
func (s *Store) HeldCalls(ctx context.Context, tool, rule string, since time.Time, limit int) ([]HeldCall, error) {
	var calls []models.ToolCall
	err := s.reports.WithContext(ctx).Select("id", "args", "original_args", "status", "created_at").
		Where("tool = ? AND rule = ? AND decision = ? AND created_at >= ?", tool, rule, models.DecidedNeedsApproval, since.UTC()).
		Order("created_at, id").Limit(limit).Find(&calls).Error
	if err != nil {
		return nil, err
	}
	out := make([]HeldCall, len(calls))
	for i, c := range calls {
		h := HeldCall{ID: c.ID, Args: c.Args, FinalArgs: c.Args, Status: c.Status, CreatedAt: c.CreatedAt, DecidedAfter: -1}
		if c.OriginalArgs != "" {
			h.Args, h.Edited = c.OriginalArgs, true
		}
		out[i] = h
	}
	return out, nil
}
