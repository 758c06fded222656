package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// SaveReview records what a person was shown about an action.
func (s *Store) SaveReview(ctx context.Context, r *models.Review) error {
	return s.Write(ctx, func(tx *Tx) error {
		r.CreatedAt = tx.now
		if err := tx.db.Create(r).Error; err != nil {
			return fmt.Errorf("save review: %w", err)
		}
		return nil
	})
}

// Review reads a review of the action by the person; ErrNotFound when
// there is none (another action's, or another person's, is none).
func (tx *Tx) Review(id, callID, staffID string) (*models.Review, error) {
	var r models.Review
	err := tx.db.Take(&r, "id = ? AND tool_call_id = ? AND staff_id = ?", id, callID, staffID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.ErrNotFound
	}
	return &r, err
}
