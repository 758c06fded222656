package storage

import (
	"context"
	"fmt"
	"sort"

	"github.com/countersign/countersign/models"
)

// RecordShadow notes that the shadow policy would have decided a call
// otherwise than the policy in force did.
func (s *Store) RecordShadow(ctx context.Context, d *models.ShadowDecision) error {
	return s.Write(ctx, func(tx *Tx) error {
		d.ID, d.CreatedAt = 0, tx.now
		if err := tx.db.Create(d).Error; err != nil {
			return fmt.Errorf("record a shadow decision: %w", err)
		}
		return nil
	})
}

// ShadowDisagreements counts a shadow policy version's disagreements by
// what was decided and what it would have decided, most common first.
func (s *Store) ShadowDisagreements(ctx context.Context, version string) ([]models.ShadowCount, error) {
	var out []models.ShadowCount
	err := s.db.WithContext(ctx).Model(&models.ShadowDecision{}).Select("decided, shadow, count(*) AS count").
		Where("policy_version = ?", version).Group("decided, shadow").Scan(&out).Error
	if err != nil {
		return nil, err
	}
	for i := range out {
		var ids []string
		if err := s.db.WithContext(ctx).Model(&models.ShadowDecision{}).
			Where("policy_version = ? AND decided = ? AND shadow = ?", version, out[i].Decided, out[i].Shadow).
			Order("created_at DESC, id DESC").Limit(3).Pluck("tool_call_id", &ids).Error; err != nil {
			return nil, err
		}
		out[i].Examples = ids
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out, nil
}
