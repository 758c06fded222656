package storage

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// ToolPins are the accepted definitions, by tool name.
func (s *Store) ToolPins(ctx context.Context) (map[string]models.ToolPin, error) {
	var rows []models.ToolPin
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the accepted tool definitions: %w", err)
	}
	out := make(map[string]models.ToolPin, len(rows))
	for _, r := range rows {
		out[r.Name] = r
	}
	return out, nil
}

// PinTools accepts definitions, each audited as tool.accepted with its
// hash, by actor, for why ("first listing of the server", "accepted on
// /tools", …). With onlyNew, a tool that has a pin already keeps it (two
// instances seeing a server's first listing at once agree on one).
func (s *Store) PinTools(ctx context.Context, pins []models.ToolPin, actor, why string, onlyNew bool) error {
	if len(pins) == 0 {
		return nil
	}
	return s.Write(ctx, func(tx *Tx) error {
		for _, p := range pins {
			p.AcceptedBy, p.AcceptedAt = actor, tx.now
			conflict := clause.OnConflict{Columns: []clause.Column{{Name: "name"}},
				DoUpdates: clause.AssignmentColumns([]string{"upstream", "hash", "definition", "accepted_by", "accepted_at"})}
			if onlyNew {
				conflict = clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoNothing: true}
			}
			res := tx.db.Clauses(conflict).Create(&p)
			if res.Error != nil {
				return fmt.Errorf("accept the definition of %s: %w", p.Name, res.Error)
			}
			if res.RowsAffected == 0 {
				continue
			}
			if err := tx.Audit(models.Event{Actor: actor, Kind: models.EventToolAccepted, Subject: p.Name,
				Payload: models.ToolAcceptedPayload{Upstream: p.Upstream, DefinitionHash: p.Hash, Why: why}}); err != nil {
				return err
			}
		}
		return nil
	})
}
