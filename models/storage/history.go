package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// liveCallStatuses are the calls that did, may yet, or may have happened.
var liveCallStatuses = models.CallStatusesWhere(models.CallStatus.MayHaveHappened)

// totalScale is what sums of arguments are counted in: millionths, whole
// numbers, so that a total is exact for any amount of up to six decimals
// (money's cents among them) and is rounded to a float64 once, at the end.
const totalScale = 1_000_000

func sumCallArgs(db *gorm.DB, d dialect, q models.CallTotal) (float64, error) {
	db = db.Model(&models.ToolCall{}).Select("COALESCE(SUM("+d.argScaled("args", totalScale)+"), 0)", d.argKey(q.Field)).
		Where("tool = ? AND status IN ?", q.Tool, liveCallStatuses)
	if q.CustomerID != "" {
		db = db.Where("customer_id = ?", q.CustomerID)
	} else {
		db = db.Where("run_id = ? AND customer_id = ''", q.RunID)
	}
	if q.ExcludeID != "" {
		db = db.Where("id <> ?", q.ExcludeID)
	}
	if !q.Since.IsZero() {
		db = db.Where("created_at >= ?", q.Since.UTC())
	}
	if !q.Before.IsZero() {
		db = db.Where("created_at < ?", q.Before.UTC())
	}
	for field, v := range q.Same {
		cond, vals, err := d.argEquals("args", field, v)
		if err != nil {
			return 0, fmt.Errorf("total of %s: %w", q.Field, err)
		}
		db = db.Where(cond, vals...)
	}
	var total int64
	err := db.Scan(&total).Error
	return float64(total) / totalScale, err
}

// SumCallArgs sums an argument over earlier live calls (see CallTotal).
func (s *Store) SumCallArgs(ctx context.Context, q models.CallTotal) (float64, error) {
	return sumCallArgs(s.db.WithContext(ctx), s.d, q)
}

// SumCallArgs is Store.SumCallArgs inside the unit of work.
func (tx *Tx) SumCallArgs(q models.CallTotal) (float64, error) {
	return sumCallArgs(tx.db, tx.dialect(), q)
}

// RunCallCounts is Store.RunCallCounts inside the unit of work.
func (tx *Tx) RunCallCounts(runID string) (map[string]int64, error) {
	return runCallCounts(tx.db, runID)
}

// PendingActionCounts counts the actions waiting for a person in a run and,
// when customerID is set, for that customer.
func (tx *Tx) PendingActionCounts(runID, customerID string) (inRun, forCustomer int64, err error) {
	base := func() *gorm.DB {
		return tx.db.Model(&models.ToolCall{}).Where("status = ?", models.CallPending).Where(notSucceeded)
	}
	if err := base().Where("run_id = ?", runID).Count(&inRun).Error; err != nil {
		return 0, 0, err
	}
	if customerID != "" {
		if err := base().Where("customer_id = ?", customerID).Count(&forCustomer).Error; err != nil {
			return 0, 0, err
		}
	}
	return inRun, forCustomer, nil
}

// AgentMaxWaiting is an agent's own limit of calls waiting for a person
// (0: the instance's).
func (tx *Tx) AgentMaxWaiting(agentID string) (int, error) {
	var a models.Agent
	err := tx.db.Select("max_waiting").Take(&a, "id = ?", agentID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	return a.MaxWaiting, err
}

// PendingActionsOfAgent counts the actions an outside agent has waiting for
// a person, over all its sessions.
func (tx *Tx) PendingActionsOfAgent(agentID string) (int64, error) {
	var n int64
	err := tx.db.Model(&models.ToolCall{}).Where("status = ?", models.CallPending).Where(notSucceeded).
		Where("run_id IN (?)", tx.db.Model(&models.Run{}).Select("id").Where("agent_id = ?", agentID)).Count(&n).Error
	return n, err
}

// CallsDecidedSince lists calls that got a decision from a policy (allow,
// deny, needs approval), made since a time, oldest first, a page at a time:
// after the (created_at, id) of the last one of the page before.
func (s *Store) CallsDecidedSince(ctx context.Context, since, afterCreated time.Time, afterID string, limit int) ([]models.ToolCall, error) {
	var out []models.ToolCall
	q := s.db.WithContext(ctx).Where("created_at >= ? AND decision <> ''", since.UTC())
	if afterID != "" {
		q = q.Where("(created_at, id) > (?, ?)", afterCreated.UTC(), afterID)
	}
	err := q.Order("created_at, id").Limit(limit).Find(&out).Error
	return out, err
}

// RunCallCountsBefore counts a run's calls by tool made before a time.
func (s *Store) RunCallCountsBefore(ctx context.Context, runID string, before time.Time) (map[string]int64, error) {
	return runCallCounts(s.db.WithContext(ctx).Where("created_at < ?", before.UTC()), runID)
}
