package storage

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

func (s *Store) pendingQuery(ctx context.Context, f models.ActionFilter) *gorm.DB {
	q := s.db.WithContext(ctx).Table("tool_calls").
		Joins("JOIN runs ON runs.id = tool_calls.run_id").
		Where("tool_calls.status = ?", models.CallPending).Where(notSucceeded)
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
func amountWhere(d dialect, f models.ActionFilter) clause.Expr {
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
func (s *Store) PendingActions(ctx context.Context, f models.ActionFilter) ([]models.ActionRow, error) {
	var rows []models.ActionRow
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
func (s *Store) RecentCustomerCalls(ctx context.Context, customerID, exceptID string, limit int) ([]models.ToolCall, error) {
	var out []models.ToolCall
	if customerID == "" {
		return out, nil
	}
	err := s.db.WithContext(ctx).Where("customer_id = ? AND id <> ? AND risk <> 'read'", customerID, exceptID).
		Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error
	return out, err
}

// CountPendingActions counts the pending actions that match (paging ignored).
func (s *Store) CountPendingActions(ctx context.Context, f models.ActionFilter) (int64, error) {
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
	err := s.db.WithContext(ctx).Model(&models.ToolCall{}).Select("tool, count(*) AS count").
		Where("status = ?", models.CallPending).Where(notSucceeded).Group("tool").Scan(&rows).Error
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Tool] = r.Count
	}
	return out, err
}

// ListRuns lists runs, most recently active first, after a cursor
// (updated_at|id of the last row of the previous page).
func (s *Store) ListRuns(ctx context.Context, status models.RunStatus, afterUpdated time.Time, afterID string, limit int) ([]models.RunRow, error) {
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
	var rows []models.RunRow
	err := q.Order("updated_at DESC, id DESC").Limit(limit).Scan(&rows).Error
	return rows, err
}

func (s *Store) auditQuery(ctx context.Context, q models.AuditQuery) *gorm.DB {
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
		if q.Status != models.CallSucceeded {
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
func (s *Store) AuditCalls(ctx context.Context, q models.AuditQuery) ([]models.AuditRow, error) {
	var rows []models.AuditRow
	err := s.auditQuery(ctx, q).Limit(q.Limit).Scan(&rows).Error
	return rows, err
}

// EachAuditCall streams every matching tool call to fn, without holding
// them all in memory.
func (s *Store) EachAuditCall(ctx context.Context, q models.AuditQuery, fn func(*models.AuditRow) error) error {
	rows, err := s.auditQuery(ctx, q).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r models.AuditRow
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
func (s *Store) AuditEventsFor(ctx context.Context, subject string) ([]models.AuditEvent, error) {
	var out []models.AuditEvent
	// A call's events are in one chain, in order; another subject's may be
	// in several.
	err := s.db.WithContext(ctx).Where("subject = ?", subject).Order("chain, seq").Find(&out).Error
	return out, err
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
