package models

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"
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
	decisions                []float64
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
	seconds       []float64
}

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
			r = &RuleInsight{Tool: tool, Rule: rule, Band: b}
			byKey[k] = r
		}
		return r
	}
	rows, err := s.db.WithContext(ctx).Raw(`SELECT tool, rule, decision, status, `+band+` AS band, COUNT(*) FROM tool_calls WHERE `+where+
		` GROUP BY tool, rule, decision, status, band`, append(bandArgs, whereArgs...)...).Rows()
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
		case DecidedAllow:
			r.Allowed += n
		case DecidedDeny:
			r.Denied += n
		case DecidedNeedsApproval:
			r.Held += n
			switch CallStatus(status) {
			case CallApproved, CallExecuting, CallSucceeded, CallFailed, CallUnknown:
				r.Approved += n
			case CallRejected:
				r.Rejected += n
			case CallExpired:
				r.Expired += n
			case CallCancelled:
				r.Cancelled += n
			case CallPending:
				r.Waiting += n
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("insights: %w", err)
	}

	// The approvals, call by call in order: each one's time is from when
	// the action reached that person (held, or the one before signed).
	aband, abandArgs := s.d.bandOf("c.args", q.Field, q.Bands)
	awhere, awhereArgs := "a.created_at >= ? AND c.created_at >= ?", []any{since, since}
	if q.Tool != "" {
		awhere, awhereArgs = awhere+" AND c.tool = ?", append(awhereArgs, q.Tool)
	}
	rows, err = s.db.WithContext(ctx).Raw(`SELECT a.tool_call_id, a.staff_id, a.staff_name, a.verdict, a.edited, c.tool, c.rule, `+aband+`, c.status, `+
		s.d.seconds("c.created_at", "a.created_at")+` FROM approvals a JOIN tool_calls c ON c.id = a.tool_call_id WHERE `+awhere+
		` ORDER BY a.tool_call_id, a.id`, append(abandArgs, awhereArgs...)...).Rows()
	if err != nil {
		return nil, nil, fmt.Errorf("insights of approvals: %w", err)
	}
	people := map[string]*ApproverInsight{}
	var lastCall string
	var lastAt float64
	var settle *RuleInsight
	var settleAt float64
	flush := func() {
		if settle != nil {
			settle.decisions = append(settle.decisions, settleAt)
		}
		settle = nil
	}
	for rows.Next() {
		var callID, staffID, name, verdict, tool, rule, b, status string
		var edited bool
		var at float64
		if err := rows.Scan(&callID, &staffID, &name, &verdict, &edited, &tool, &rule, &b, &status, &at); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("insights of approvals: %w", err)
		}
		if callID != lastCall {
			flush()
			lastCall, lastAt = callID, 0
		}
		p := people[staffID]
		if p == nil {
			p = &ApproverInsight{StaffID: staffID, Name: name}
			people[staffID] = p
		}
		took := max(at-lastAt, 0)
		lastAt = at
		p.Decisions++
		p.seconds = append(p.seconds, took)
		if took < QuickDecision.Seconds() {
			p.Quick++
		}
		switch verdict {
		case "approve":
			p.Approved++
		case "reject":
			p.Rejected++
		}
		r := get(tool, rule, b)
		if edited {
			p.Edited++
			if verdict == "approve" {
				r.Edited++
			}
		}
		if status != string(CallPending) {
			settle, settleAt = r, at // the last one settled it
		}
	}
	flush()
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("insights of approvals: %w", err)
	}

	out := make([]RuleInsight, 0, len(byKey))
	for _, r := range byKey {
		r.DecisionP50, r.DecisionP90 = percentile(r.decisions, 0.5), percentile(r.decisions, 0.9)
		r.decisions = nil
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
		p.MedianSeconds = percentile(p.seconds, 0.5)
		p.seconds = nil
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
	i := int(float64(len(xs))*p+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// seconds is SQL for the seconds from one time column to another.
func (d dialect) seconds(from, to string) string {
	if d.pg {
		return "EXTRACT(EPOCH FROM (" + to + " - " + from + "))::float8"
	}
	return "(julianday(" + to + ") - julianday(" + from + ")) * 86400.0"
}

// bandOf is SQL naming the band of a numeric top-level argument, with its
// values: '' when there are no bands.
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
	Status       CallStatus
	CreatedAt    time.Time
	FinalArgs    string
	DecidedAfter float64 // seconds, -1 when not decided by people
}

// HeldCalls are the calls of a tool that a rule held since a time, oldest
// first, at most limit.
func (s *Store) HeldCalls(ctx context.Context, tool, rule string, since time.Time, limit int) ([]HeldCall, error) {
	var calls []ToolCall
	err := s.db.WithContext(ctx).Select("id", "args", "original_args", "status", "created_at").
		Where("tool = ? AND rule = ? AND decision = ? AND created_at >= ?", tool, rule, DecidedNeedsApproval, since.UTC()).
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
