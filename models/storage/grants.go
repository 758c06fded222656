package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// CreateGrant records a grant, in the unit of work of the approval that
// gives it.
func (tx *Tx) CreateGrant(g *models.Grant) error {
	g.CreatedAt = tx.now
	if err := tx.db.Create(g).Error; err != nil {
		return fmt.Errorf("create grant: %w", err)
	}
	return nil
}

// grantLookup finds the usable grant that expires first. Most calls have
// none: it is one prepared query on the lookup index, through the writer's
// fast path. The roles are those whose grant covers the call, padded.
const grantLookup = `SELECT id FROM grants WHERE customer_id = ? AND tool = ? AND revoked_at IS NULL AND expires_at > ?
	AND agent_id = COALESCE((SELECT agent_id FROM runs WHERE id = ?), '')
	AND role IN (?, ?, ?, ?) AND (max_uses = 0 OR uses < max_uses) AND (max_cents = 0 OR used_cents + ? <= max_cents)
	ORDER BY expires_at, id LIMIT 1`

// grantTake counts a call against a grant if it still takes it.
const grantTake = `UPDATE grants SET uses = uses + 1, used_cents = used_cents + ?, last_used_at = ?
	WHERE id = ? AND revoked_at IS NULL AND expires_at > ? AND (max_uses = 0 OR uses < max_uses)
	AND (max_cents = 0 OR used_cents + ? <= max_cents)`

// UseGrant finds an active grant of the customer for the tool, given on a
// call that came the way the run's calls come (the same outside agent, or
// Countersign's own conversations), by
// someone whose role could have approved the call alone (role is what the
// policy asked for), that can take a call of the given amount (0 when the
// tool has none), and counts the call against it; of several, the one that
// expires first is used. It returns nil, nil when no grant covers the
// call. The count is a conditional update, so two calls at once never take
// the last use twice.
func (tx *Tx) UseGrant(tool, customerID, runID string, role models.StaffRole, amount models.Cents) (*models.Grant, error) {
	if customerID == "" {
		return nil, nil
	}
	roles := [4]any{"", "", "", ""}
	n := 0
	for _, r := range models.StaffRoles {
		if r.AtLeast(role) && n < len(roles) {
			roles[n] = string(r)
			n++
		}
	}
	for range 3 { // another unit may take or revoke the one found first
		row, err := tx.queryRow(grantLookup, customerID, tool, tx.now, runID, roles[0], roles[1], roles[2], roles[3], int64(amount))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("find a grant: %w", err)
		}
		id, ok := textValue(row[0])
		if !ok {
			return nil, fmt.Errorf("find a grant: unexpected id %v", row[0])
		}
		taken, err := tx.exec(grantTake, int64(amount), tx.now, id, tx.now, int64(amount))
		if err != nil {
			return nil, fmt.Errorf("use grant %s: %w", id, err)
		}
		if taken == 0 {
			continue
		}
		var g models.Grant
		if err := tx.db.Where("id = ?", id).Take(&g).Error; err != nil {
			return nil, fmt.Errorf("read grant %s: %w", id, err)
		}
		return &g, nil
	}
	return nil, nil
}

// RevokeGrant ends a grant before its time, with who did it and why, and
// audits it. A grant already revoked, expired or used up is a conflict.
func (s *Store) RevokeGrant(ctx context.Context, id, actor, reason string) (*models.Grant, error) {
	var g models.Grant
	err := s.Write(ctx, func(tx *Tx) error {
		if err := tx.db.Where("id = ?", id).Take(&g).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return models.ErrNotFound
			}
			return err
		}
		if st := g.StateAt(tx.now); st != models.GrantActive {
			return fmt.Errorf("%w: the grant is already %s", models.ErrConflict, st)
		}
		at := tx.now
		res := tx.db.Model(&models.Grant{}).Where("id = ? AND revoked_at IS NULL", id).
			Updates(map[string]any{"revoked_at": at, "revoked_by": actor, "revoke_reason": reason})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: the grant is already revoked", models.ErrConflict)
		}
		g.RevokedAt, g.RevokedBy, g.RevokeReason = &at, actor, reason
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventGrantRevoked, Subject: id, Payload: models.GrantRevokedPayload{
			CustomerID: g.CustomerID, Tool: g.Tool, Uses: g.Uses, UsedAmount: g.UsedCents.Dollars(), Reason: reason}})
	})
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// Grant reads one grant.
func (s *Store) Grant(ctx context.Context, id string) (*models.Grant, error) {
	var g models.Grant
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&g).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, models.ErrNotFound
	}
	return &g, err
}

// Grants lists the grants that still allow calls, and those that ended
// within the last `ended` (expired, used up or revoked), newest first, up
// to limit.
func (s *Store) Grants(ctx context.Context, ended time.Duration, limit int) ([]models.Grant, error) {
	since := s.Now().Add(-ended)
	var out []models.Grant
	err := s.db.WithContext(ctx).
		Where("revoked_at > ? OR (revoked_at IS NULL AND expires_at > ?)", since, since).
		Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error
	return out, err
}
