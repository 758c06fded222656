package storage

import (
	"context"
	"errors"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// RegisterOAuthClient stores a client that registered itself.
func (s *Store) RegisterOAuthClient(ctx context.Context, c *models.OAuthClient) error {
	return s.Write(ctx, func(tx *Tx) error {
		c.CreatedAt = tx.now
		if err := pruneUnauthorizedClients(tx); err != nil {
			return err
		}
		if err := tx.db.Create(c).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "oauth", Kind: models.EventOAuthClientRegistered, Subject: c.ID,
			Payload: models.OAuthClientRegisteredPayload{Name: c.Name, RedirectURIs: c.RedirectURIs}})
	})
}

// SaveOAuthClientDocument stores (or refreshes) a client known by its
// metadata document's URL: its name and redirects as the document says
// now; who authorized it, and as which agent, stay.
func (s *Store) SaveOAuthClientDocument(ctx context.Context, c *models.OAuthClient) error {
	return s.Write(ctx, func(tx *Tx) error {
		c.CreatedAt = tx.now
		res := tx.db.Model(&models.OAuthClient{}).Where("id = ?", c.ID).
			Updates(map[string]any{"name": c.Name, "redirect_uris": c.RedirectURIs, "client_uri": c.ClientURI, "created_at": tx.now})
		if res.Error != nil || res.RowsAffected == 1 {
			return res.Error
		}
		if err := pruneUnauthorizedClients(tx); err != nil {
			return err
		}
		if err := tx.db.Create(c).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "oauth", Kind: models.EventOAuthClientRegistered, Subject: c.ID,
			Payload: models.OAuthClientRegisteredPayload{Name: c.Name, RedirectURIs: c.RedirectURIs}})
	})
}

func pruneUnauthorizedClients(tx *Tx) error {
	old := tx.db.Model(&models.OAuthClient{}).Select("id").Where("agent_id = '' AND revoked_at IS NULL AND created_at < ?", tx.now.Add(-models.UnauthorizedClientLifetime))
	if err := tx.db.Where("client_id IN (?)", old).Delete(&models.OAuthRecord{}).Error; err != nil {
		return err
	}
	return tx.db.Where("agent_id = '' AND revoked_at IS NULL AND created_at < ?", tx.now.Add(-models.UnauthorizedClientLifetime)).Delete(&models.OAuthClient{}).Error
}

// OAuthClientByID reads a client.
func (s *Store) OAuthClientByID(ctx context.Context, id string) (*models.OAuthClient, error) {
	var c models.OAuthClient
	if err := s.db.WithContext(ctx).Take(&c, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// OAuthClients lists the clients an admin authorized, newest first.
func (s *Store) OAuthClients(ctx context.Context) ([]models.OAuthClient, error) {
	var out []models.OAuthClient
	err := s.db.WithContext(ctx).Where("agent_id <> ''").Order("authorized_at DESC, id").Find(&out).Error
	return out, err
}

// AuthorizeOAuthClient records that an admin (actor) authorized the client
// to act as the agent agentID; the agent must exist and not be revoked,
// and the client must not be revoked.
func (s *Store) AuthorizeOAuthClient(ctx context.Context, clientID, agentID string, actor models.Actor) error {
	return s.Write(ctx, func(tx *Tx) error {
		var ag models.Agent
		if err := tx.db.Take(&ag, "id = ? AND revoked_at IS NULL", agentID).Error; err != nil {
			return notFound(err)
		}
		res := tx.db.Model(&models.OAuthClient{}).Where("id = ? AND revoked_at IS NULL", clientID).
			Updates(map[string]any{"agent_id": agentID, "authorized_by": actor.ID, "authorized_at": tx.now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.ErrNotFound
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventOAuthClientAuthorized, Subject: clientID,
			Payload: models.OAuthClientAuthorizedPayload{AgentID: agentID, AgentName: ag.Name}})
	})
}

// RevokeOAuthClient ends a client at once: its tokens are deleted in the
// same unit, and it gets no new ones.
func (s *Store) RevokeOAuthClient(ctx context.Context, clientID string, actor models.Actor) error {
	return s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Model(&models.OAuthClient{}).Where("id = ? AND revoked_at IS NULL", clientID).Update("revoked_at", tx.now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.ErrNotFound
		}
		if err := tx.db.Where("client_id = ?", clientID).Delete(&models.OAuthRecord{}).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor.String(), Kind: models.EventOAuthClientRevoked, Subject: clientID, Payload: models.OAuthClientRevokedPayload{}})
	})
}

// PutOAuthRecord stores (or replaces) one of the authorization server's
// records, pruning those that expired.
func (s *Store) PutOAuthRecord(ctx context.Context, r *models.OAuthRecord) error {
	return s.Write(ctx, func(tx *Tx) error {
		r.CreatedAt = tx.now
		if err := tx.db.Where("expires_at < ?", tx.now).Delete(&models.OAuthRecord{}).Error; err != nil {
			return err
		}
		return tx.db.Save(r).Error
	})
}

// OAuthRecordByID reads a record that has not expired.
func (s *Store) OAuthRecordByID(ctx context.Context, kind, id string) (*models.OAuthRecord, error) {
	var r models.OAuthRecord
	err := s.db.WithContext(ctx).Take(&r, "kind = ? AND id = ? AND expires_at > ?", kind, id, s.now()).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// TakeOAuthRecord deletes a record and returns it, if it was there and had
// not expired: of two taking it at once, one gets it (a code is used once,
// a refresh token rotates once).
func (s *Store) TakeOAuthRecord(ctx context.Context, kind, id string) (*models.OAuthRecord, error) {
	var r models.OAuthRecord
	err := s.Write(ctx, func(tx *Tx) error {
		if err := tx.db.Take(&r, "kind = ? AND id = ? AND expires_at > ?", kind, id, tx.now).Error; err != nil {
			return notFound(err)
		}
		res := tx.db.Where("kind = ? AND id = ?", kind, id).Delete(&models.OAuthRecord{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return models.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RevokeOAuthFamily deletes every record of one sign-in: what a token
// used twice (a stolen one, maybe) leaves no use to anyone.
func (s *Store) RevokeOAuthFamily(ctx context.Context, family string) (int64, error) {
	var n int64
	err := s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Where("family = ? AND family <> ''", family).Delete(&models.OAuthRecord{})
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// DeleteOAuthRecord deletes a record (nothing when it is not there).
func (s *Store) DeleteOAuthRecord(ctx context.Context, kind, id string) error {
	return s.Write(ctx, func(tx *Tx) error {
		err := tx.db.Where("kind = ? AND id = ?", kind, id).Delete(&models.OAuthRecord{}).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		return err
	})
}
