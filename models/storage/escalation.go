package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
)

// Unanswered lists pending actions made at or before `before` that were not
// yet marked overdue, oldest first.
func (s *Store) Unanswered(ctx context.Context, before time.Time, limit int) ([]models.ToolCall, error) {
	var out []models.ToolCall
	err := s.db.WithContext(ctx).Where("status = ?", models.CallPending).Where(notSucceeded).
		Where("created_at <= ? AND overdue_at IS NULL", before).Order("created_at").Limit(limit).Find(&out).Error
	return out, err
}

// ExpiringBy lists pending actions that expire after now and at or before
// `by`, whose approvers were not yet reminded, soonest first.
func (s *Store) ExpiringBy(ctx context.Context, now, by time.Time, limit int) ([]models.ToolCall, error) {
	var out []models.ToolCall
	err := s.db.WithContext(ctx).Where("status = ?", models.CallPending).Where(notSucceeded).
		Where("expires_at > ? AND expires_at <= ? AND reminded_at IS NULL", now, by).Order("expires_at").Limit(limit).Find(&out).Error
	return out, err
}

// MarkOverdue marks a pending action overdue, once: false when it is no
// longer pending or was marked already (by another instance).
func (tx *Tx) MarkOverdue(id string) (bool, error) {
	n, err := tx.exec(`UPDATE tool_calls SET overdue_at = ? WHERE id = ? AND status = ? AND overdue_at IS NULL`, tx.now, id, models.CallPending)
	if err != nil {
		return false, fmt.Errorf("mark %s overdue: %w", id, err)
	}
	return n == 1, nil
}

// MarkReminded records that a pending action's approvers were reminded,
// once: false when it is no longer pending or was marked already.
func (tx *Tx) MarkReminded(id string) (bool, error) {
	n, err := tx.exec(`UPDATE tool_calls SET reminded_at = ? WHERE id = ? AND status = ? AND reminded_at IS NULL`, tx.now, id, models.CallPending)
	if err != nil {
		return false, fmt.Errorf("mark %s reminded: %w", id, err)
	}
	return n == 1, nil
}
