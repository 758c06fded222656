package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// ToolPin is the definition of an upstream MCP tool that was accepted: by
// an admin on /tools, by the tools file (a server it trusts), or as the
// server first listed it. A definition that differs from its pin is held
// at high_write until an admin accepts it (agent.Gate).
type ToolPin struct {
	Name     string `gorm:"primaryKey;size:200"` // the name Countersign offers
	Upstream string `gorm:"size:64;index"`       // the tools file's name for the server
	Hash     string `gorm:"size:64"`             // SHA-256 (hex) of Definition
	// Definition is the tool as the server listed it (MCP's Tool, JSON).
	Definition string
	AcceptedBy string `gorm:"size:200"`
	AcceptedAt time.Time
}

// ToolPins are the accepted definitions, by tool name.
func (s *Store) ToolPins(ctx context.Context) (map[string]ToolPin, error) {
	var rows []ToolPin
	if err := s.db.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read the accepted tool definitions: %w", err)
	}
	out := make(map[string]ToolPin, len(rows))
	for _, r := range rows {
		out[r.Name] = r
	}
	return out, nil
}

// PinTools accepts definitions, each audited as tool.accepted with its
// hash, by actor, for why ("first listing of the server", "accepted on
// /tools", …). With onlyNew, a tool that has a pin already keeps it (two
// instances seeing a server's first listing at once agree on one).
func (s *Store) PinTools(ctx context.Context, pins []ToolPin, actor, why string, onlyNew bool) error {
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
			if err := tx.Audit(Event{Actor: actor, Kind: EventToolAccepted, Subject: p.Name,
				Payload: ToolAcceptedPayload{Upstream: p.Upstream, DefinitionHash: p.Hash, Why: why}}); err != nil {
				return err
			}
		}
		return nil
	})
}
