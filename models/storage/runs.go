package storage

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// AppendTurn adds a turn at the end of its run's transcript. The run is
// locked first (on PostgreSQL), so two instances never give two turns one
// number.
func (tx *Tx) AppendTurn(t *models.Turn) error {
	if tx.d.pg {
		if _, err := tx.Run(t.RunID); err != nil {
			return fmt.Errorf("append turn: %w", err)
		}
	}
	if t.Marker != "" {
		var n int64
		if err := tx.db.Model(&models.Turn{}).Where("run_id = ? AND marker = ?", t.RunID, t.Marker).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return models.ErrDuplicate
		}
	}
	var last int64
	if err := tx.db.Model(&models.Turn{}).Select("COALESCE(MAX(seq), 0)").Where("run_id = ?", t.RunID).Scan(&last).Error; err != nil {
		return fmt.Errorf("append turn: %w", err)
	}
	t.Seq = last + 1
	t.CreatedAt = tx.now
	if err := tx.db.Create(t).Error; err != nil {
		return fmt.Errorf("append turn: %w", err)
	}
	return tx.touchRun(t.RunID)
}

func (tx *Tx) touchRun(id string) error {
	return tx.db.Model(&models.Run{}).Where("id = ?", id).Update("updated_at", tx.now).Error
}

// SetRunStatus moves a run to a status; from, when given, lists the statuses
// it must be in (ErrConflict otherwise). It reports whether it changed.
func (tx *Tx) SetRunStatus(id string, to models.RunStatus, lastError string, from ...models.RunStatus) (bool, error) {
	q := tx.db.Model(&models.Run{}).Where("id = ?", id)
	if len(from) > 0 {
		q = q.Where("status IN ?", from)
	}
	res := q.Where("status <> ? OR last_error <> ?", to, lastError).
		Updates(map[string]any{"status": to, "last_error": lastError, "updated_at": tx.now})
	if res.Error != nil {
		return false, fmt.Errorf("set run status: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Run reads a run inside the unit of work, locked until the unit ends (on
// PostgreSQL).
func (tx *Tx) Run(id string) (*models.Run, error) {
	var r models.Run
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&r, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// RunByTokenHash finds the run a customer's run token opens.
func (s *Store) RunByTokenHash(ctx context.Context, hash string) (*models.Run, error) {
	var r models.Run
	if err := s.db.WithContext(ctx).Take(&r, "token_hash = ?", hash).Error; err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// Turns lists a run's transcript after a sequence number, in order.
func (s *Store) Turns(ctx context.Context, runID string, afterSeq int64) ([]models.Turn, error) {
	var out []models.Turn
	err := s.db.WithContext(ctx).Where("run_id = ? AND seq > ?", runID, afterSeq).Order("seq").Find(&out).Error
	return out, err
}

// RunCalls lists every tool call of a run, oldest first.
func (s *Store) RunCalls(ctx context.Context, runID string) ([]models.ToolCall, error) {
	var out []models.ToolCall
	err := s.db.WithContext(ctx).Where("run_id = ?", runID).Order("created_at, id").Find(&out).Error
	return out, err
}

// RunsInStatus lists the ids of runs in one of the statuses.
func (s *Store) RunsInStatus(ctx context.Context, statuses ...models.RunStatus) ([]string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Model(&models.Run{}).Where("status IN ?", statuses).Order("updated_at").Pluck("id", &ids).Error
	return ids, err
}
