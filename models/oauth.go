package models

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
)

// OAuthClient is an MCP client that registered with Countersign's
// authorization server. It may get tokens only once an admin authorized it
// as an outside agent (AgentID), and none after it was revoked.
type OAuthClient struct {
	// ID is the client_id: one Countersign gave (csc_…), or the https URL
	// of the client's metadata document.
	ID           string `gorm:"primaryKey;size:500"`
	Name         string `gorm:"size:200"`
	RedirectURIs string `gorm:"type:text"` // JSON: []string
	ClientURI    string `gorm:"size:500"`
	CreatedAt    time.Time
	AgentID      string `gorm:"size:40;default:''"`
	AuthorizedBy string `gorm:"size:64;default:''"` // the staff id of the admin who authorized it
	AuthorizedAt *time.Time
	RevokedAt    *time.Time
}

// OAuthRecord is one of the authorization server's records: an
// authorization request ("request"), a code pointing at one ("code"), an
// access token ("access") or a refresh token ("refresh"). Data is the
// server's own JSON; a record past ExpiresAt is gone.
type OAuthRecord struct {
	Kind      string    `gorm:"primaryKey;size:16"`
	ID        string    `gorm:"primaryKey;size:128"`
	ClientID  string    `gorm:"size:64;index"`
	Data      string    `gorm:"type:text"`
	ExpiresAt time.Time `gorm:"index"`
	CreatedAt time.Time
	// Family is the sign-in (authorization request) a token descends from.
	Family string `gorm:"size:64;index;default:''"`
}

// TableName is oauth_clients (gorm would say o_auth_clients).
func (OAuthClient) TableName() string { return "oauth_clients" }

// TableName is oauth_records.
func (OAuthRecord) TableName() string { return "oauth_records" }

// RegisterOAuthClient stores a client that registered itself.
func (s *Store) RegisterOAuthClient(ctx context.Context, c *OAuthClient) error {
	return s.Write(ctx, func(tx *Tx) error {
		c.CreatedAt = tx.now
		if err := pruneUnauthorizedClients(tx); err != nil {
			return err
		}
		if err := tx.db.Create(c).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: "oauth", Kind: EventOAuthClientRegistered, Subject: c.ID,
			Payload: OAuthClientRegisteredPayload{Name: c.Name, RedirectURIs: c.RedirectURIs}})
	})
}

// SaveOAuthClientDocument stores (or refreshes) a client known by its
// metadata document's URL: its name and redirects as the document says
// now; who authorized it, and as which agent, stay.
func (s *Store) SaveOAuthClientDocument(ctx context.Context, c *OAuthClient) error {
	return s.Write(ctx, func(tx *Tx) error {
		c.CreatedAt = tx.now
		res := tx.db.Model(&OAuthClient{}).Where("id = ?", c.ID).
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
		return tx.Audit(Event{Actor: "oauth", Kind: EventOAuthClientRegistered, Subject: c.ID,
			Payload: OAuthClientRegisteredPayload{Name: c.Name, RedirectURIs: c.RedirectURIs}})
	})
}

// UnauthorizedClientLifetime is how long a client no admin authorized is
// kept: then it is deleted (with its requests), as it would have to ask
// again anyway. Its registration stays in the audit log.
const UnauthorizedClientLifetime = 24 * time.Hour

func pruneUnauthorizedClients(tx *Tx) error {
	old := tx.db.Model(&OAuthClient{}).Select("id").Where("agent_id = '' AND revoked_at IS NULL AND created_at < ?", tx.now.Add(-UnauthorizedClientLifetime))
	if err := tx.db.Where("client_id IN (?)", old).Delete(&OAuthRecord{}).Error; err != nil {
		return err
	}
	return tx.db.Where("agent_id = '' AND revoked_at IS NULL AND created_at < ?", tx.now.Add(-UnauthorizedClientLifetime)).Delete(&OAuthClient{}).Error
}

// OAuthClientByID reads a client.
func (s *Store) OAuthClientByID(ctx context.Context, id string) (*OAuthClient, error) {
	var c OAuthClient
	if err := s.db.WithContext(ctx).Take(&c, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &c, nil
}

// OAuthClients lists the clients an admin authorized, newest first.
func (s *Store) OAuthClients(ctx context.Context) ([]OAuthClient, error) {
	var out []OAuthClient
	err := s.db.WithContext(ctx).Where("agent_id <> ''").Order("authorized_at DESC, id").Find(&out).Error
	return out, err
}

// AuthorizeOAuthClient records that an admin (actor) authorized the client
// to act as the agent agentID; the agent must exist and not be revoked,
// and the client must not be revoked.
func (s *Store) AuthorizeOAuthClient(ctx context.Context, clientID, agentID string, actor Actor) error {
	return s.Write(ctx, func(tx *Tx) error {
		var ag Agent
		if err := tx.db.Take(&ag, "id = ? AND revoked_at IS NULL", agentID).Error; err != nil {
			return notFound(err)
		}
		res := tx.db.Model(&OAuthClient{}).Where("id = ? AND revoked_at IS NULL", clientID).
			Updates(map[string]any{"agent_id": agentID, "authorized_by": actor.ID, "authorized_at": tx.now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrNotFound
		}
		return tx.Audit(Event{Actor: actor.String(), Kind: EventOAuthClientAuthorized, Subject: clientID,
			Payload: OAuthClientAuthorizedPayload{AgentID: agentID, AgentName: ag.Name}})
	})
}

// RevokeOAuthClient ends a client at once: its tokens are deleted in the
// same unit, and it gets no new ones.
func (s *Store) RevokeOAuthClient(ctx context.Context, clientID string, actor Actor) error {
	return s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Model(&OAuthClient{}).Where("id = ? AND revoked_at IS NULL", clientID).Update("revoked_at", tx.now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrNotFound
		}
		if err := tx.db.Where("client_id = ?", clientID).Delete(&OAuthRecord{}).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: actor.String(), Kind: EventOAuthClientRevoked, Subject: clientID, Payload: OAuthClientRevokedPayload{}})
	})
}

// PutOAuthRecord stores (or replaces) one of the authorization server's
// records, pruning those that expired.
func (s *Store) PutOAuthRecord(ctx context.Context, r *OAuthRecord) error {
	return s.Write(ctx, func(tx *Tx) error {
		r.CreatedAt = tx.now
		if err := tx.db.Where("expires_at < ?", tx.now).Delete(&OAuthRecord{}).Error; err != nil {
			return err
		}
		return tx.db.Save(r).Error
	})
}

// OAuthRecordByID reads a record that has not expired.
func (s *Store) OAuthRecordByID(ctx context.Context, kind, id string) (*OAuthRecord, error) {
	var r OAuthRecord
	err := s.db.WithContext(ctx).Take(&r, "kind = ? AND id = ? AND expires_at > ?", kind, id, s.now()).Error
	if err != nil {
		return nil, notFound(err)
	}
	return &r, nil
}

// TakeOAuthRecord deletes a record and returns it, if it was there and had
// not expired: of two taking it at once, one gets it (a code is used once,
// a refresh token rotates once).
func (s *Store) TakeOAuthRecord(ctx context.Context, kind, id string) (*OAuthRecord, error) {
	var r OAuthRecord
	err := s.Write(ctx, func(tx *Tx) error {
		if err := tx.db.Take(&r, "kind = ? AND id = ? AND expires_at > ?", kind, id, tx.now).Error; err != nil {
			return notFound(err)
		}
		res := tx.db.Where("kind = ? AND id = ?", kind, id).Delete(&OAuthRecord{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return ErrNotFound
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
		res := tx.db.Where("family = ? AND family <> ''", family).Delete(&OAuthRecord{})
		n = res.RowsAffected
		return res.Error
	})
	return n, err
}

// DeleteOAuthRecord deletes a record (nothing when it is not there).
func (s *Store) DeleteOAuthRecord(ctx context.Context, kind, id string) error {
	return s.Write(ctx, func(tx *Tx) error {
		err := tx.db.Where("kind = ? AND id = ?", kind, id).Delete(&OAuthRecord{}).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		return err
	})
}
