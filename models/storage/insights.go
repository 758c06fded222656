package storage

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/countersign/countersign/models"
	"golang.org/x/sync/errgroup"
)

// Insights are what the recorded calls say about the policy's rules and
// the people who decide: per tool and rule, how the calls went; per
// approver, how they decide. They are read from the calls and approvals
// with indexes of their own (idx_tool_calls_insights, idx_approvals_created)
// and summed here, so that a page over a million calls stays fast.

// InsightsQuery chooses the calls: made since Since, of one tool when Tool
// is given, split into bands of the numeric argument Field at Bands (50,
// 200 gives "under 50", "50 to 200", "200 and over", besides "no amount").
type InsightsQuery struct {
	Since time.Time
	Tool  string
	Field string
	Bands []float64
}

// RuleInsight is how the calls one rule decided went.
type RuleInsight struct {
	Tool, Rule string
	Band       string // "" without bands
	Calls      int64
	Allowed    int64 // the policy let them through
	Denied     int64
	Held       int64 // waited for a person
	Approved   int64
	Edited     int64 // approved with arguments a person changed
	Rejected   int64
	Expired    int64
	Cancelled  int64
	Waiting    int64
	// DecisionP50 and DecisionP90 are seconds from held to decided by
	// people (-1: none decided).
	DecisionP50, DecisionP90 float64
}

// ApproverInsight is how one person decided.
type ApproverInsight struct {
	StaffID, Name string
	Decisions     int64
	Approved      int64
	Rejected      int64
	Edited        int64
	// Quick counts decisions made under 3 seconds after the action reached
	// them (it was held, or the approver before them signed): the
	// rubber-stamp signal.
	Quick int64
	// MedianSeconds is their median time to decide.
	MedianSeconds float64
}

// verdicts is what one slice of the period's verdicts says.
type verdicts struct {
	people map[string]*ApproverInsight
	took   map[string][]float64
	rules  map[[3]string]*ruleVerdicts
}

type ruleVerdicts struct {
	edited  int64
	settled []float64
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
func (s *Store) readVerdicts(ctx context.Context, from string, args []any, bandCol string, part [2]time.Time) (verdicts, error) {
	v := verdicts{people: map[string]*ApproverInsight{}, took: map[string][]float64{}, rules: map[[3]string]*ruleVerdicts{}}
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
		return v, err
	}
	defer rows.Close()
	for rows.Next() {
		var staffID, verdict, tool, rule, b string
		var edited bool
		var secs float64
		var settled *float64
		if err := rows.Scan(&staffID, &verdict, &edited, &tool, &rule, &b, &secs, &settled); err != nil {
			return v, err
		}
		p := v.people[staffID]
		if p == nil {
			p = &ApproverInsight{StaffID: staffID}
			v.people[staffID] = p
		}
		p.Decisions++
		v.took[staffID] = append(v.took[staffID], secs)
		if secs < QuickDecision.Seconds() {
			p.Quick++
		}
		switch verdict {
		case "approve":
			p.Approved++
		case "reject":
			p.Rejected++
		}
		k := [3]string{tool, rule, b}
		r := v.rules[k]
		if r == nil {
			r = &ruleVerdicts{}
			v.rules[k] = r
		}
		if edited {
			p.Edited++
			if verdict == "approve" {
				r.edited++
			}
		}
		if settled != nil {
			r.settled = append(r.settled, *settled)
		}
	}
	return v, rows.Err()
}

// HourFormat is how call_hours names an hour (UTC).
const HourFormat = "2006-01-02 15"

// QuickDecision is the time under which a decision counts as quick.
const QuickDecision = 3 * time.Second

// Insights reads the calls and the approvals the query chooses.
func (s *Store) Insights(ctx context.Context, q InsightsQuery) ([]RuleInsight, []ApproverInsight, error) {
	since := q.Since.UTC()
	band, bandArgs := s.d.bandOf("args", q.Field, q.Bands)
	where, whereArgs := "created_at >= ?", []any{since}
	if q.Tool != "" {
		where, whereArgs = "tool = ? AND "+where, []any{q.Tool, since}
	}
	byKey := map[[3]string]*RuleInsight{}
	get := func(tool, rule, b string) *RuleInsight {
		k := [3]string{tool, rule, b}
		r := byKey[k]
		if r == nil {
			r = &RuleInsight{Tool: tool, Rule: rule, Band: b, DecisionP50: -1, DecisionP90: -1}
			byKey[k] = r
		}
		return r
	}
	// Without bands: the hours wholly in the period from call_hours, and
	// the calls of the hour it starts in. With bands, every call's
	// arguments are read.
	var counts string
	var countArgs []any
	if len(bandArgs) > 0 {
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
		return nil, nil, fmt.Errorf("insights: %w", err)
	}
	for rows.Next() {
		var tool, rule, decision, status, b string
		var n int64
		if err := rows.Scan(&tool, &rule, &decision, &status, &b, &n); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("insights: %w", err)
		}
		r := get(tool, rule, b)
		r.Calls += n
		switch decision {
		case models.DecidedAllow:
			r.Allowed += n
		case models.DecidedDeny:
			r.Denied += n
		case models.DecidedNeedsApproval:
			r.Held += n
			switch models.CallStatus(status) {
			case models.CallApproved, models.CallExecuting, models.CallSucceeded, models.CallFailed, models.CallUnknown: // call_hours says approved
				r.Approved += n
			case models.CallRejected:
				r.Rejected += n
			case models.CallExpired:
				r.Expired += n
			case models.CallCancelled:
				r.Cancelled += n
			case models.CallPending:
				r.Waiting += n
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("insights: %w", err)
	}

	// The verdicts given in the period, summed in whole seconds: each keeps
	// its call's tool and rule and how long its person took
	// (Approval.TookS, .SettledS), so that without bands no call is read.
	// With bands, the calls' arguments are.
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
	// The verdicts are many (a sixth of the calls, say): the period is read
	// in slices at once, one per report connection (ReportConns).
	parts := verdictSlices(since, s.now(), min(runtime.GOMAXPROCS(0), ReportConns))
	got := make([]verdicts, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	for i, part := range parts {
		g.Go(func() error {
			var err error
			got[i], err = s.readVerdicts(gctx, from, fromArgs, bandCol, part)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, fmt.Errorf("insights of approvals: %w", err)
	}
	people := map[string]*ApproverInsight{}
	took := map[*ApproverInsight][]float64{}
	times := map[*RuleInsight][]float64{}
	for _, v := range got {
		for id, p := range v.people {
			all := people[id]
			if all == nil {
				all = &ApproverInsight{StaffID: id, MedianSeconds: -1}
				people[id] = all
			}
			all.Decisions, all.Approved, all.Rejected, all.Edited, all.Quick = all.Decisions+p.Decisions, all.Approved+p.Approved,
				all.Rejected+p.Rejected, all.Edited+p.Edited, all.Quick+p.Quick
			took[all] = append(took[all], v.took[id]...)
		}
		for k, r := range v.rules {
			all := get(k[0], k[1], k[2])
			all.Edited += r.edited
			times[all] = append(times[all], r.settled...)
		}
	}
	for p, xs := range took {
		p.MedianSeconds = percentile(xs, 0.5)
	}
	for r, xs := range times {
		r.DecisionP50, r.DecisionP90 = percentile(xs, 0.5), percentile(xs, 0.9)
	}

	// Names as the staff list has them (the index holds ids only).
	var staff []models.Staff
	if err := s.db.WithContext(ctx).Select("id", "name").Find(&staff).Error; err != nil {
		return nil, nil, fmt.Errorf("insights: %w", err)
	}
	for _, st := range staff {
		if p := people[st.ID]; p != nil && p.Name == "" {
			p.Name = st.Name
		}
	}
	for id, p := range people { // not on the staff list (Slack, an account gone): the name their verdicts kept
		if p.Name != "" {
			continue
		}
		var last []models.Approval
		if err := s.db.WithContext(ctx).Select("staff_name").Where("staff_id = ?", id).Order("id DESC").Limit(1).Find(&last).Error; err != nil {
			return nil, nil, fmt.Errorf("insights: %w", err)
		}
		if p.Name = id; len(last) > 0 && last[0].StaffName != "" {
			p.Name = last[0].StaffName
		}
	}
	out := make([]RuleInsight, 0, len(byKey))
	for _, r := range byKey {
		if r.Calls > 0 || r.Edited > 0 {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Band < b.Band
	})
	approvers := make([]ApproverInsight, 0, len(people))
	for _, p := range people {
		approvers = append(approvers, *p)
	}
	sort.Slice(approvers, func(i, j int) bool {
		if approvers[i].Decisions != approvers[j].Decisions {
			return approvers[i].Decisions > approvers[j].Decisions
		}
		return approvers[i].Name < approvers[j].Name
	})
	return out, approvers, nil
}

// percentile is the nearest-rank percentile of xs (-1 for none); xs is
// sorted in place.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	sort.Float64s(xs)
	i := int(math.Ceil(float64(len(xs))*p)) - 1
	return xs[min(max(i, 0), len(xs)-1)]
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
