package storage

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
)

// DisabledStaff tells which of the accounts are disabled, inside the unit
// of work (ids that are not accounts are not disabled).
func (tx *Tx) DisabledStaff(ids []string) (map[string]bool, error) {
	return disabledStaff(tx.db, ids)
}

// DisabledStaff is Tx.DisabledStaff outside a unit of work.
func (s *Store) DisabledStaff(ctx context.Context, ids []string) (map[string]bool, error) {
	return disabledStaff(s.db.WithContext(ctx), ids)
}

func disabledStaff(db *gorm.DB, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	var disabled []string
	err := db.Model(&models.Staff{}).Where("id IN ? AND disabled", ids).Pluck("id", &disabled).Error
	for _, id := range disabled {
		out[id] = true
	}
	return out, err
}

// CreateStaff adds an account.
func (s *Store) CreateStaff(ctx context.Context, st *models.Staff, actor string) error {
	return s.Write(ctx, func(tx *Tx) error { return tx.CreateStaff(st, actor, "") })
}

// StaffByEmail finds an account by email.
func (s *Store) StaffByEmail(ctx context.Context, email string) (*models.Staff, error) {
	var st models.Staff
	if err := s.db.WithContext(ctx).Take(&st, "email = ?", strings.ToLower(strings.TrimSpace(email))).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// StaffByID finds an account by id.
func (s *Store) StaffByID(ctx context.Context, id string) (*models.Staff, error) {
	var st models.Staff
	if err := s.db.WithContext(ctx).Take(&st, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// AllStaff lists every account, by name.
func (s *Store) AllStaff(ctx context.Context) ([]models.Staff, error) {
	var out []models.Staff
	err := s.db.WithContext(ctx).Order("name, email").Find(&out).Error
	return out, err
}

// UpdateStaff changes an account's role or disabled flag (Tx.UpdateStaff).
func (s *Store) UpdateStaff(ctx context.Context, id string, role *models.StaffRole, disabled *bool, actor string) error {
	return s.Write(ctx, func(tx *Tx) error { return tx.UpdateStaff(id, role, disabled, actor) })
}

// CreateSession stores a new session (its id already hashed).
func (s *Store) CreateSession(ctx context.Context, sess *models.Session) error {
	return s.Write(ctx, func(tx *Tx) error {
		sess.CreatedAt, sess.LastSeenAt = tx.now, tx.now
		if err := tx.db.Create(sess).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: "staff:" + sess.StaffID, Kind: models.EventStaffSignedIn, Subject: sess.StaffID, Payload: models.StaffSessionPayload{}})
	})
}

// SessionWithStaff finds a session and its account.
func (s *Store) SessionWithStaff(ctx context.Context, idHash string) (*models.Session, *models.Staff, error) {
	var sess models.Session
	if err := s.db.WithContext(ctx).Take(&sess, "id_hash = ?", idHash).Error; err != nil {
		return nil, nil, notFound(err)
	}
	st, err := s.StaffByID(ctx, sess.StaffID)
	if err != nil {
		return nil, nil, err
	}
	return &sess, st, nil
}

// TouchSession records activity, at most once a minute per session.
func (s *Store) TouchSession(ctx context.Context, idHash string, now time.Time) error {
	return s.db.WithContext(ctx).Model(&models.Session{}).Where("id_hash = ? AND last_seen_at < ?", idHash, now.Add(-time.Minute)).
		Update("last_seen_at", now).Error
}

// DeleteSession ends a session.
func (s *Store) DeleteSession(ctx context.Context, idHash, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Where("id_hash = ?", idHash).Delete(&models.Session{})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffSignedOut, Subject: idHash[:12], Payload: models.StaffSessionPayload{}})
	})
}

// CreateAPIToken stores a staff API token (hashed).
func (s *Store) CreateAPIToken(ctx context.Context, t *models.APIToken, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		t.CreatedAt = tx.now
		if err := tx.db.Create(t).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffTokenCreated, Subject: t.StaffID, Payload: models.StaffTokenPayload{TokenID: t.ID}})
	})
}

// RevokeAPIToken deletes the staff API token with this hash, with its audit
// event; it returns the account the token acted as, or ErrNotFound.
func (s *Store) RevokeAPIToken(ctx context.Context, hash, actor string) (staffID string, err error) {
	err = s.Write(ctx, func(tx *Tx) error {
		var t models.APIToken
		if err := tx.db.Take(&t, "token_hash = ?", hash).Error; err != nil {
			return notFound(err)
		}
		if err := tx.db.Delete(&models.APIToken{}, "id = ?", t.ID).Error; err != nil {
			return err
		}
		staffID = t.StaffID
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffTokenRevoked, Subject: t.StaffID, Payload: models.StaffTokenPayload{TokenID: t.ID}})
	})
	return staffID, err
}

// APITokenCounts tells how many staff API tokens each account has.
func (s *Store) APITokenCounts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		StaffID string
		N       int
	}
	if err := s.db.WithContext(ctx).Model(&models.APIToken{}).Select("staff_id, count(*) AS n").Group("staff_id").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.StaffID] = r.N
	}
	return out, nil
}

// RevokeStaffTokens deletes every staff API token of an account, with one
// audit event; it returns how many there were.
func (s *Store) RevokeStaffTokens(ctx context.Context, staffID, actor string) (int64, error) {
	var n int64
	err := s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Where("staff_id = ?", staffID).Delete(&models.APIToken{})
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		if n == 0 {
			return nil
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffTokensRevoked, Subject: staffID, Payload: models.StaffTokensRevokedPayload{Count: n}})
	})
	return n, err
}

// StaffByTokenHash finds the account a staff API token belongs to.
func (s *Store) StaffByTokenHash(ctx context.Context, hash string) (*models.Staff, error) {
	var t models.APIToken
	if err := s.db.WithContext(ctx).Take(&t, "token_hash = ?", hash).Error; err != nil {
		return nil, notFound(err)
	}
	return s.StaffByID(ctx, t.StaffID)
}

// LinkStaff links an account to its address on a channel ("" unlinks
// it), audited. One address on a channel is one account's at most.
func (s *Store) LinkStaff(ctx context.Context, id, channel, address, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		if err := tx.db.Take(&models.Staff{}, "id = ?", id).Error; err != nil {
			return notFound(err)
		}
		var was models.StaffLink
		err := tx.db.Take(&was, "staff_id = ? AND channel = ?", id, channel).Error
		if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		if was.Address == address {
			return nil
		}
		if address != "" {
			var n int64
			if err := tx.db.Model(&models.StaffLink{}).Where("channel = ? AND address = ? AND staff_id <> ?", channel, address, id).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return models.ErrLinkTaken
			}
		}
		if err := tx.db.Where("staff_id = ? AND channel = ?", id, channel).Delete(&models.StaffLink{}).Error; err != nil {
			return err
		}
		if address != "" {
			if err := tx.db.Create(&models.StaffLink{StaffID: id, Channel: channel, Address: address, CreatedAt: tx.now}).Error; err != nil {
				return err
			}
		}
		if err := tx.db.Model(&models.Staff{}).Where("id = ?", id).Update("updated_at", tx.now).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffUpdated, Subject: id,
			Payload: models.StaffUpdatedPayload{Link: &models.LinkChange{Channel: channel, FromTo: models.FromTo[string]{From: was.Address, To: address}}}})
	})
}

// StaffByLink finds the account linked to an address on a channel.
func (s *Store) StaffByLink(ctx context.Context, channel, address string) (*models.Staff, error) {
	if address == "" {
		return nil, notFound(gorm.ErrRecordNotFound)
	}
	var l models.StaffLink
	if err := s.db.WithContext(ctx).Take(&l, "channel = ? AND address = ?", channel, address).Error; err != nil {
		return nil, notFound(err)
	}
	return s.StaffByID(ctx, l.StaffID)
}

// StaffLinks are every account's addresses: staff id -> channel -> address.
func (s *Store) StaffLinks(ctx context.Context) (map[string]map[string]string, error) {
	var links []models.StaffLink
	if err := s.db.WithContext(ctx).Find(&links).Error; err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, l := range links {
		if out[l.StaffID] == nil {
			out[l.StaffID] = map[string]string{}
		}
		out[l.StaffID][l.Channel] = l.Address
	}
	return out, nil
}

// StaffWhoMayDecide lists the enabled accounts whose role may decide an
// action that needs the given role, with an email address.
func (s *Store) StaffWhoMayDecide(ctx context.Context, role models.StaffRole) ([]models.Staff, error) {
	return staffWhoMayDecide(s.db.WithContext(ctx), role)
}

func staffWhoMayDecide(db *gorm.DB, role models.StaffRole) ([]models.Staff, error) {
	var all []models.Staff
	if err := db.Where("NOT disabled AND email <> ''").Order("email").Find(&all).Error; err != nil {
		return nil, err
	}
	out := all[:0]
	for _, st := range all {
		if st.Role.AtLeast(role) && st.Role.CanDecide() {
			out = append(out, st)
		}
	}
	return out, nil
}

// StaffWhoMayDecide is Store.StaffWhoMayDecide inside a unit of work.
func (tx *Tx) StaffWhoMayDecide(role models.StaffRole) ([]models.Staff, error) {
	return staffWhoMayDecide(tx.db, role)
}
