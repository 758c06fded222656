package models

import (
	"context"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ActionRow is a pending action with what the queue shows beside it.
type ActionRow struct {
	ToolCall
	CustomerName string
	// Agent is the outside agent that asked ("" for Countersign's own runs).
	Agent     string
	Approvals int // distinct approvals of the arguments now in force
}

// ActionFilter narrows the queue. Zero values match everything.
type ActionFilter struct {
	Tool string
	// Customer matches a customer id exactly, or a name's beginning.
	Customer string
	// MinAmount and MaxAmount bound the call's sum of money: the argument
	// AmountArgs names for its tool, in cents. A call of a tool without one
	// does not match an amount.
	MinAmount, MaxAmount *Cents
	AmountArgs           map[string]string // tool -> argument
	Offset, Limit        int
}

func (s *Store) pendingQuery(ctx context.Context, f ActionFilter) *gorm.DB {
	q := s.db.WithContext(ctx).Table("tool_calls").
		Joins("JOIN runs ON runs.id = tool_calls.run_id").
		Where("tool_calls.status = ?", CallPending).Where(notSucceeded)
	if f.Tool != "" {
		q = q.Where("tool_calls.tool = ?", f.Tool)
	}
	if c := strings.TrimSpace(f.Customer); c != "" {
		q = q.Where("(tool_calls.customer_id = ? OR runs.customer_name "+s.d.like()+" ? ESCAPE '\\')", c, escapeLike(c)+"%")
	}
	if f.MinAmount != nil || f.MaxAmount != nil {
		q = q.Where(amountWhere(s.d, f))
	}
	return q
}

// amountWhere matches calls whose tool has a sum of money within the bounds.
func amountWhere(d dialect, f ActionFilter) clause.Expr {
	tools := make([]string, 0, len(f.AmountArgs))
	for t := range f.AmountArgs {
		tools = append(tools, t)
	}
	sort.Strings(tools) // the same filter gives the same SQL
	var sql strings.Builder
	var vars []any
	for i, t := range tools {
		if i > 0 {
			sql.WriteString(" OR ")
		}
		amount := d.argScaled("tool_calls.args", 100)
		sql.WriteString("(tool_calls.tool = ?")
		vars = append(vars, t)
		if f.MinAmount != nil {
			sql.WriteString(" AND " + amount + " >= ?")
			vars = append(vars, d.argKey(f.AmountArgs[t]), int64(*f.MinAmount))
		}
		if f.MaxAmount != nil {
			sql.WriteString(" AND " + amount + " <= ?")
			vars = append(vars, d.argKey(f.AmountArgs[t]), int64(*f.MaxAmount))
		}
		sql.WriteString(")")
	}
	if len(tools) == 0 {
		return gorm.Expr("1 = 0")
	}
	return gorm.Expr("("+sql.String()+")", vars...)
}

// PendingActions lists pending actions that match, oldest first, one page.
func (s *Store) PendingActions(ctx context.Context, f ActionFilter) ([]ActionRow, error) {
	var rows []ActionRow
	if f.Limit <= 0 {
		f.Limit = 50
	}
	err := s.pendingQuery(ctx, f).
		Select(`tool_calls.*, runs.customer_name AS customer_name,
			CASE WHEN runs.agent_id <> '' THEN runs.channel ELSE '' END AS agent,
			(SELECT COUNT(DISTINCT a.staff_id) FROM approvals a
			 WHERE a.tool_call_id = tool_calls.id AND a.verdict = 'approve' AND a.args_hash = tool_calls.args_hash) AS approvals`).
		Order("tool_calls.created_at, tool_calls.id").Offset(f.Offset).Limit(f.Limit).Scan(&rows).Error
	return rows, err
}

// RecentCustomerCalls lists a customer's latest calls other than one, newest
// first, leaving out reads: what an approver should know they asked before.
func (s *Store) RecentCustomerCalls(ctx context.Context, customerID, exceptID string, limit int) ([]ToolCall, error) {
	var out []ToolCall
	if customerID == "" {
		return out, nil
	}
	err := s.db.WithContext(ctx).Where("customer_id = ? AND id <> ? AND risk <> 'read'", customerID, exceptID).
		Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error
	return out, err
}

// CountPendingActions counts the pending actions that match (paging ignored).
func (s *Store) CountPendingActions(ctx context.Context, f ActionFilter) (int64, error) {
	var n int64
	err := s.pendingQuery(ctx, f).Count(&n).Error
	return n, err
}

// PendingActionsByTool counts every pending action by tool.
func (s *Store) PendingActionsByTool(ctx context.Context) (map[string]int64, error) {
	type row struct {
		Tool  string
		Count int64
	}
	var rows []row
	err := s.db.WithContext(ctx).Model(&ToolCall{}).Select("tool, count(*) AS count").
		Where("status = ?", CallPending).Where(notSucceeded).Group("tool").Scan(&rows).Error
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Tool] = r.Count
	}
	return out, err
}

// RunRow is a run with its number of turns and of tool calls.
type RunRow struct {
	Run
	Turns, Calls int64
	// FirstMessage is the start of what the customer wrote first.
	FirstMessage string
}

// ListRuns lists runs, most recently active first, after a cursor
// (updated_at|id of the last row of the previous page).
func (s *Store) ListRuns(ctx context.Context, status RunStatus, afterUpdated time.Time, afterID string, limit int) ([]RunRow, error) {
	q := s.db.WithContext(ctx).Table("runs").
		Select(`runs.*, (SELECT COUNT(*) FROM turns WHERE turns.run_id = runs.id) AS turns,
			(SELECT COUNT(*) FROM tool_calls c WHERE c.run_id = runs.id) AS calls,
			(SELECT substr(t.text, 1, 200) FROM turns t WHERE t.run_id = runs.id AND t.role = 'customer' ORDER BY t.seq LIMIT 1) AS first_message`)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	if afterID != "" {
		q = q.Where("(updated_at, id) < (?, ?)", afterUpdated, afterID)
	}
	var rows []RunRow
	err := q.Order("updated_at DESC, id DESC").Limit(limit).Scan(&rows).Error
	return rows, err
}

// AuditQuery filters the audit list.
type AuditQuery struct {
	Tool, Decision, Staff, Customer, Text string
	Status                                CallStatus
	// DecisionsOnly leaves out allowed reads: what a person or a rule
	// actually decided.
	DecisionsOnly bool
	From, To      time.Time // zero: open
	// Keyset cursor: rows strictly older than this (created_at, id).
	BeforeCreated time.Time
	BeforeID      string
	Limit         int
}

// AuditRow is one tool call with who decided it.
type AuditRow struct {
	ToolCall
	CustomerName string
	DecidedBy    string // names of the staff who gave a verdict, comma separated
}

func (s *Store) auditQuery(ctx context.Context, q AuditQuery) *gorm.DB {
	db := s.db.WithContext(ctx).Table("tool_calls").
		// string_agg with ORDER BY reads the same in SQLite (3.44 and later)
		// and PostgreSQL, and lists the verdicts in the order they were given.
		Select(`tool_calls.*, runs.customer_name AS customer_name,
			(SELECT string_agg(a.staff_name || ' (' || a.verdict || ')', ', ' ORDER BY a.created_at, a.id)
				FROM approvals a WHERE a.tool_call_id = tool_calls.id) AS decided_by`).
		Joins("JOIN runs ON runs.id = tool_calls.run_id")
	if q.Tool != "" {
		db = db.Where("tool_calls.tool = ?", q.Tool)
	}
	if q.DecisionsOnly {
		db = db.Where("NOT (tool_calls.decision = 'allow' AND tool_calls.risk = 'read')")
	}
	if q.Decision != "" {
		if q.Decision == "none" {
			db = db.Where("tool_calls.decision = ''")
		} else {
			db = db.Where("tool_calls.decision = ?", q.Decision)
		}
	}
	if q.Status != "" {
		db = db.Where("tool_calls.status = ?", q.Status)
		if q.Status != CallSucceeded {
			db = db.Where(notSucceeded)
		}
	}
	if q.Customer != "" {
		db = db.Where("tool_calls.customer_id = ?", q.Customer)
	}
	if q.Staff != "" {
		like := "%" + escapeLike(q.Staff) + "%"
		// A correlated subquery rather than EXISTS: SQLite 3.54 turns that
		// EXISTS into a join with a Bloom filter built over every approval
		// first, much slower on a large log (BENCHMARKS.md, "The back office").
		db = db.Where(`(SELECT 1 FROM approvals a WHERE a.tool_call_id = tool_calls.id
			AND (a.staff_name `+s.d.like()+` ? ESCAPE '\' OR a.staff_id = ?) LIMIT 1) IS NOT NULL`, like, q.Staff)
	}
	if q.Text != "" {
		db = s.textSearch(db, q.Text)
	}
	if !q.From.IsZero() {
		db = db.Where("tool_calls.created_at >= ?", q.From.UTC())
	}
	if !q.To.IsZero() {
		db = db.Where("tool_calls.created_at < ?", q.To.UTC())
	}
	if q.BeforeID != "" {
		// A row-value comparison, which SQLite and PostgreSQL both answer
		// from the (created_at, id) index.
		db = db.Where("(tool_calls.created_at, tool_calls.id) < (?, ?)", q.BeforeCreated, q.BeforeID)
	}
	return db.Order("tool_calls.created_at DESC, tool_calls.id DESC")
}

// AuditCalls lists tool calls, newest first.
func (s *Store) AuditCalls(ctx context.Context, q AuditQuery) ([]AuditRow, error) {
	var rows []AuditRow
	err := s.auditQuery(ctx, q).Limit(q.Limit).Scan(&rows).Error
	return rows, err
}

// EachAuditCall streams every matching tool call to fn, without holding
// them all in memory.
func (s *Store) EachAuditCall(ctx context.Context, q AuditQuery, fn func(*AuditRow) error) error {
	rows, err := s.auditQuery(ctx, q).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r AuditRow
		if err := s.db.ScanRows(rows, &r); err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// AuditEventsFor lists the audit events about a subject, oldest first.
func (s *Store) AuditEventsFor(ctx context.Context, subject string) ([]AuditEvent, error) {
	var out []AuditEvent
	err := s.db.WithContext(ctx).Where("subject = ?", subject).Order("seq").Find(&out).Error
	return out, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
