package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CreateRun inserts a run.
func (tx *Tx) CreateRun(r *models.Run) error {
	r.CreatedAt, r.UpdatedAt = tx.now, tx.now
	if err := tx.db.Create(r).Error; err != nil {
		return fmt.Errorf("create run: %w", err)
	}
	return nil
}

// CreateToolCall inserts a tool call with its decision.
func (tx *Tx) CreateToolCall(c *models.ToolCall) error {
	c.CreatedAt, c.UpdatedAt, c.Owner, c.Chain = tx.now, tx.now, tx.self, tx.chain.no
	if c.Decision != "" {
		now := tx.now
		c.DecidedAt = &now
	}
	err := tx.send("record tool call", `INSERT INTO tool_calls (id, run_id, customer_id, turn_id, model_call_id, tool, risk, raw_args, args, args_hash, original_args,
		status, decision, rule, reason, policy_version, required_approvals, required_role, expires_at,
		idempotency_key, agent_key, context, error, error_detail, result, created_at, updated_at, decided_at, finished_at, owner, tool_hash, trace, chain)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.RunID, c.CustomerID, c.TurnID, c.ModelCallID, c.Tool, c.Risk, c.RawArgs, c.Args, c.ArgsHash, c.OriginalArgs,
		c.Status, c.Decision, c.Rule, c.Reason, c.PolicyVersion, c.RequiredApprovals, c.RequiredRole, c.ExpiresAt,
		c.IdempotencyKey, c.AgentKey, c.Context, c.Error, c.ErrorDetail, c.Result, c.CreatedAt, c.UpdatedAt, c.DecidedAt, c.FinishedAt, tx.self, c.ToolHash, c.Trace, c.Chain)
	if err != nil {
		return err
	}
	tx.knowChain(c.ID, c.Chain)
	tx.entered(c.ID, c.Status)
	return nil
}

// ToolCall reads a tool call inside the unit of work, to change it: on
// PostgreSQL the row stays locked until the unit ends, so two units deciding
// on one call (two approvals of an action) take turns.
func (tx *Tx) ToolCall(id string) (*models.ToolCall, error) {
	var c models.ToolCall
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&c, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	tx.knowChain(c.ID, c.Chain)
	return &c, nil
}

// ChangeCallStatus moves a call from one of the expected statuses to a new
// one. It affects exactly one row or returns ErrConflict: that is what makes
// two simultaneous approvals produce one execution.
func (tx *Tx) ChangeCallStatus(ch models.CallChange) error {
	if !ch.To.Valid() || len(ch.From) == 0 {
		return fmt.Errorf("change tool call %s: no such change %v -> %q", ch.ID, ch.From, ch.To)
	}
	for _, from := range ch.From {
		if !from.MayBecome(ch.To) {
			return fmt.Errorf("change tool call %s: a call never goes from %s to %s", ch.ID, from, ch.To)
		}
	}
	var q strings.Builder
	args := make([]any, 0, 6+len(ch.From))
	q.WriteString("UPDATE tool_calls SET status = ?, updated_at = ?")
	args = append(args, ch.To, tx.now)
	switch ch.To {
	case models.CallApproved, models.CallExecuting:
		// This instance runs it (or, approved, is about to): the call is
		// its own until it stops beating.
		q.WriteString(", owner = ?")
		args = append(args, tx.self)
		if ch.To == models.CallApproved {
			q.WriteString(", decided_at = ?")
			args = append(args, tx.now)
		}
	case models.CallRejected, models.CallExpired, models.CallCancelled:
		q.WriteString(", decided_at = ?, error = ?, result = ?")
		args = append(args, tx.now, ch.Error, ch.Result)
	default: // an outcome
		q.WriteString(", finished_at = ?, error = ?, result = ?")
		args = append(args, tx.now, ch.Error, ch.Result)
	}
	q.WriteString(" WHERE id = ? AND status IN (?" + strings.Repeat(", ?", len(ch.From)-1) + ")")
	args = append(args, ch.ID)
	for _, f := range ch.From {
		args = append(args, f)
	}
	if err := tx.changeOne(ch.ID, q.String(), args...); err != nil {
		return err
	}
	tx.entered(ch.ID, ch.To)
	return nil
}

// FinishCall records how an executing call ended: succeeded with its result
// (JSON), or failed with an error for the model and one for staff. It is
// ChangeCallStatus for the one change every allowed call makes, with a
// statement that never changes shape.
func (tx *Tx) FinishCall(id string, status models.CallStatus, result, errForModel, errDetail string) error {
	if status != models.CallSucceeded && status != models.CallFailed {
		return fmt.Errorf("finish tool call %s: %q is not an outcome", id, status)
	}
	if err := tx.changeOne(id, `UPDATE tool_calls SET status = ?, result = ?, error = ?, error_detail = ?, updated_at = ?, finished_at = ?
		WHERE id = ? AND status = ?`, status, result, errForModel, errDetail, tx.now, tx.now, id, models.CallExecuting); err != nil {
		return err
	}
	tx.entered(id, status)
	return nil
}

// EditPendingCall changes the arguments of a call that is still pending.
func (tx *Tx) EditPendingCall(id string, e models.CallEdit) error {
	return tx.changeOne(id, `UPDATE tool_calls SET args = ?, args_hash = ?, original_args = ?, required_approvals = ?, required_role = ?,
		passkey_required = ?, expires_at = ?, updated_at = ?
		WHERE id = ? AND status = ?`, e.Args, e.ArgsHash, e.OriginalArgs, e.RequiredApprovals, e.RequiredRole,
		e.PasskeyRequired, e.ExpiresAt, tx.now, id, models.CallPending)
}

// changeOne runs an update of one call and insists that exactly one row
// changed: a call no longer in the expected status is ErrConflict. The
// call's audit chain comes back with it, for its events (chains.go).
func (tx *Tx) changeOne(id, query string, args ...any) error {
	if !tx.d.pg {
		// One instance, one chain (chains.go): nothing to learn.
		n, err := tx.exec(query, args...)
		if err != nil {
			return fmt.Errorf("update tool call %s: %w", id, err)
		}
		if n != 1 {
			return models.ErrConflict
		}
		return nil
	}
	var chain int64
	_, err := tx.w.pgBatch(&queued{query: query + " RETURNING chain", wrap: "update tool call", args: args}, &chain)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return models.ErrConflict
	case err != nil:
		return fmt.Errorf("update tool call %s: %w", id, err)
	}
	tx.knowChain(id, chain)
	return nil
}

// CreateApproval stores one staff verdict, with the call's tool and rule
// and how long the person took (Approval.TookS, .SettledS) for insights.
func (tx *Tx) CreateApproval(a *models.Approval) error {
	a.CreatedAt = tx.now
	var c models.ToolCall
	if err := tx.db.Select("tool", "rule", "created_at").Take(&c, "id = ?", a.ToolCallID).Error; err != nil {
		return fmt.Errorf("record approval: %w", notFound(err))
	}
	var prior []models.Approval
	if err := tx.db.Select("created_at").Where("tool_call_id = ?", a.ToolCallID).Order("id DESC").Limit(1).Find(&prior).Error; err != nil {
		return fmt.Errorf("record approval: %w", err)
	}
	from := c.CreatedAt
	if len(prior) > 0 && prior[0].CreatedAt.After(from) {
		from = prior[0].CreatedAt
	}
	a.Tool, a.Rule, a.TookS = c.Tool, c.Rule, max(tx.now.Sub(from).Seconds(), 0)
	if a.Settles {
		settled := max(tx.now.Sub(c.CreatedAt).Seconds(), 0)
		a.SettledS = &settled
	}
	if err := tx.db.Create(a).Error; err != nil {
		return fmt.Errorf("record approval: %w", err)
	}
	return nil
}

// Approvals lists the verdicts on a call, oldest first, inside the unit of work.
func (tx *Tx) Approvals(callID string) ([]models.Approval, error) {
	var out []models.Approval
	err := tx.db.Where("tool_call_id = ?", callID).Order("id").Find(&out).Error
	return out, err
}

// ToolCall reads one tool call.
func (s *Store) ToolCall(ctx context.Context, id string) (*models.ToolCall, error) {
	var c models.ToolCall
	if err := s.db.WithContext(ctx).Take(&c, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// ToolCallWithoutResult is a call's record but its result, which may be big.
func (s *Store) ToolCallWithoutResult(ctx context.Context, id string) (*models.ToolCall, error) {
	var c models.ToolCall
	if err := s.db.WithContext(ctx).Omit("result").Take(&c, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// Approvals lists the verdicts on a call, oldest first.
func (s *Store) Approvals(ctx context.Context, callID string) ([]models.Approval, error) {
	var out []models.Approval
	err := s.db.WithContext(ctx).Where("tool_call_id = ?", callID).Order("id").Find(&out).Error
	return out, err
}

// SeenBy is, for each of the calls named, what each person who gave a
// verdict on it was shown before deciding (their kept review), in the order
// the verdicts were given; a verdict given without a review is left out.
func (s *Store) SeenBy(ctx context.Context, callIDs []string) (map[string][]models.Approval, error) {
	out := map[string][]models.Approval{}
	if len(callIDs) == 0 {
		return out, nil
	}
	var rows []models.Approval
	err := s.db.WithContext(ctx).Where("tool_call_id IN ? AND seen <> ''", callIDs).Order("created_at, id").Find(&rows).Error
	for _, a := range rows {
		out[a.ToolCallID] = append(out[a.ToolCallID], a)
	}
	return out, err
}

// notSucceeded is added, as written, to a query for calls in a status other
// than succeeded: the status index leaves succeeded calls out, and SQLite
// (like PostgreSQL) only uses such a partial index when the query's own
// terms show it cannot need the rows left out, which a bound parameter
// cannot show.
const notSucceeded = "tool_calls.status <> 'succeeded'"

// OverdueActionIDs lists pending actions whose expiry has passed.
func (s *Store) OverdueActionIDs(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&models.ToolCall{}).
		Where("status = ? AND expires_at IS NOT NULL AND expires_at <= ?", models.CallPending, now.UTC()).Where(notSucceeded).
		Order("expires_at").Limit(limit).Pluck("id", &ids).Error
	return ids, err
}

// RunCallCounts counts the calls recorded so far in a run, by tool.
func (s *Store) RunCallCounts(ctx context.Context, runID string) (map[string]int64, error) {
	return runCallCounts(s.db.WithContext(ctx), runID)
}

func runCallCounts(db *gorm.DB, runID string) (map[string]int64, error) {
	type row struct {
		Tool  string
		Count int64
	}
	var rows []row
	err := db.Model(&models.ToolCall{}).Select("tool, count(*) AS count").
		Where("run_id = ?", runID).Group("tool").Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Tool] = r.Count
	}
	return out, nil
}

// Run reads one run.
func (s *Store) Run(ctx context.Context, id string) (*models.Run, error) {
	var r models.Run
	if err := s.db.WithContext(ctx).Take(&r, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}
