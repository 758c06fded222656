package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Staff is a back-office account.
type Staff struct {
	ID           string    `gorm:"primaryKey;size:40"`
	Email        string    `gorm:"size:200;uniqueIndex"`
	Name         string    `gorm:"size:200"`
	Role         StaffRole `gorm:"size:16"`
	PasswordHash string    `gorm:"size:200"`
	Disabled     bool
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// SlackUserID links the account to a Slack user: a click in Slack acts
	// as this account (agent/outbox, web's Slack interactions).
	SlackUserID string `gorm:"size:40;default:''"`
}

// Session is a signed-in browser. Its id is stored as a SHA-256 of the
// cookie value, so a copy of the database opens no session.
type Session struct {
	IDHash     string `gorm:"primaryKey;size:64"`
	StaffID    string `gorm:"size:40;index;not null"`
	Staff      *Staff `gorm:"constraint:OnDelete:CASCADE"`
	CSRFToken  string `gorm:"size:64"`
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// APIToken lets a program act as a staff member on the staff API.
type APIToken struct {
	ID         string `gorm:"primaryKey;size:40"`
	StaffID    string `gorm:"size:40;index;not null"`
	Staff      *Staff `gorm:"constraint:OnDelete:CASCADE"`
	TokenHash  string `gorm:"size:64;uniqueIndex"`
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

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
	err := db.Model(&Staff{}).Where("id IN ? AND disabled", ids).Pluck("id", &disabled).Error
	for _, id := range disabled {
		out[id] = true
	}
	return out, err
}

// ErrEmailTaken is returned when an email already has an account.
var ErrEmailTaken = errors.New("email taken")

// CreateStaff adds an account.
func (s *Store) CreateStaff(ctx context.Context, st *Staff, actor string) error {
	st.Email = strings.ToLower(strings.TrimSpace(st.Email))
	return s.Write(ctx, func(tx *Tx) error {
		var n int64
		if err := tx.db.Model(&Staff{}).Where("email = ?", st.Email).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return ErrEmailTaken
		}
		st.CreatedAt, st.UpdatedAt = tx.now, tx.now
		if err := tx.db.Create(st).Error; err != nil {
			return fmt.Errorf("create staff: %w", err)
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffCreated, Subject: st.ID, Payload: StaffCreatedPayload{Email: st.Email, Name: st.Name, Role: st.Role}})
	})
}

// StaffByEmail finds an account by email.
func (s *Store) StaffByEmail(ctx context.Context, email string) (*Staff, error) {
	var st Staff
	if err := s.db.WithContext(ctx).Take(&st, "email = ?", strings.ToLower(strings.TrimSpace(email))).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// StaffByID finds an account by id.
func (s *Store) StaffByID(ctx context.Context, id string) (*Staff, error) {
	var st Staff
	if err := s.db.WithContext(ctx).Take(&st, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// AllStaff lists every account, by name.
func (s *Store) AllStaff(ctx context.Context) ([]Staff, error) {
	var out []Staff
	err := s.db.WithContext(ctx).Order("name, email").Find(&out).Error
	return out, err
}

// UpdateStaff changes an account's role or disabled flag. Disabling ends its
// sessions and tokens at once, in the same transaction.
func (s *Store) UpdateStaff(ctx context.Context, id string, role *StaffRole, disabled *bool, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		var st Staff
		if err := tx.db.Take(&st, "id = ?", id).Error; err != nil {
			return notFound(err)
		}
		set := map[string]any{"updated_at": tx.now}
		var payload StaffUpdatedPayload
		if role != nil && *role != st.Role {
			set["role"] = *role
			payload.Role = &FromTo[StaffRole]{From: st.Role, To: *role}
		}
		if disabled != nil && *disabled != st.Disabled {
			set["disabled"] = *disabled
			payload.Disabled = disabled
		}
		if payload == (StaffUpdatedPayload{}) {
			return nil
		}
		if err := tx.db.Model(&Staff{}).Where("id = ?", id).Updates(set).Error; err != nil {
			return err
		}
		if payload.Role != nil || (disabled != nil && *disabled) {
			// A new role or a disabled account: every open session starts over.
			if err := tx.db.Where("staff_id = ?", id).Delete(&Session{}).Error; err != nil {
				return err
			}
		}
		if disabled != nil && *disabled {
			if err := tx.db.Where("staff_id = ?", id).Delete(&APIToken{}).Error; err != nil {
				return err
			}
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffUpdated, Subject: id, Payload: payload})
	})
}

// CreateSession stores a new session (its id already hashed).
func (s *Store) CreateSession(ctx context.Context, sess *Session) error {
	return s.Write(ctx, func(tx *Tx) error {
		sess.CreatedAt, sess.LastSeenAt = tx.now, tx.now
		if err := tx.db.Create(sess).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: "staff:" + sess.StaffID, Kind: EventStaffSignedIn, Subject: sess.StaffID, Payload: StaffSessionPayload{}})
	})
}

// SessionWithStaff finds a session and its account.
func (s *Store) SessionWithStaff(ctx context.Context, idHash string) (*Session, *Staff, error) {
	var sess Session
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
	return s.db.WithContext(ctx).Model(&Session{}).Where("id_hash = ? AND last_seen_at < ?", idHash, now.Add(-time.Minute)).
		Update("last_seen_at", now).Error
}

// DeleteSession ends a session.
func (s *Store) DeleteSession(ctx context.Context, idHash, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		res := tx.db.Where("id_hash = ?", idHash).Delete(&Session{})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffSignedOut, Subject: idHash[:12], Payload: StaffSessionPayload{}})
	})
}

// CreateAPIToken stores a staff API token (hashed).
func (s *Store) CreateAPIToken(ctx context.Context, t *APIToken, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		t.CreatedAt = tx.now
		if err := tx.db.Create(t).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffTokenCreated, Subject: t.StaffID, Payload: StaffTokenPayload{TokenID: t.ID}})
	})
}

// RevokeAPIToken deletes the staff API token with this hash, with its audit
// event; it returns the account the token acted as, or ErrNotFound.
func (s *Store) RevokeAPIToken(ctx context.Context, hash, actor string) (staffID string, err error) {
	err = s.Write(ctx, func(tx *Tx) error {
		var t APIToken
		if err := tx.db.Take(&t, "token_hash = ?", hash).Error; err != nil {
			return notFound(err)
		}
		if err := tx.db.Delete(&APIToken{}, "id = ?", t.ID).Error; err != nil {
			return err
		}
		staffID = t.StaffID
		return tx.Audit(Event{Actor: actor, Kind: EventStaffTokenRevoked, Subject: t.StaffID, Payload: StaffTokenPayload{TokenID: t.ID}})
	})
	return staffID, err
}

// APITokenCounts tells how many staff API tokens each account has.
func (s *Store) APITokenCounts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		StaffID string
		N       int
	}
	if err := s.db.WithContext(ctx).Model(&APIToken{}).Select("staff_id, count(*) AS n").Group("staff_id").Scan(&rows).Error; err != nil {
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
		res := tx.db.Where("staff_id = ?", staffID).Delete(&APIToken{})
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		if n == 0 {
			return nil
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffTokensRevoked, Subject: staffID, Payload: StaffTokensRevokedPayload{Count: n}})
	})
	return n, err
}

// StaffByTokenHash finds the account a staff API token belongs to.
func (s *Store) StaffByTokenHash(ctx context.Context, hash string) (*Staff, error) {
	var t APIToken
	if err := s.db.WithContext(ctx).Take(&t, "token_hash = ?", hash).Error; err != nil {
		return nil, notFound(err)
	}
	return s.StaffByID(ctx, t.StaffID)
}

// ErrSlackTaken is returned when a Slack user is already linked to another
// account.
var ErrSlackTaken = errors.New("slack user taken")

// LinkSlack links an account to a Slack user id ("" unlinks it). One Slack
// user acts as one account at most.
func (s *Store) LinkSlack(ctx context.Context, id, slackUser, actor string) error {
	slackUser = strings.TrimSpace(slackUser)
	return s.Write(ctx, func(tx *Tx) error {
		var st Staff
		if err := tx.db.Take(&st, "id = ?", id).Error; err != nil {
			return notFound(err)
		}
		if st.SlackUserID == slackUser {
			return nil
		}
		if slackUser != "" {
			var n int64
			if err := tx.db.Model(&Staff{}).Where("slack_user_id = ? AND id <> ?", slackUser, id).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return ErrSlackTaken
			}
		}
		if err := tx.db.Model(&Staff{}).Where("id = ?", id).Updates(map[string]any{"slack_user_id": slackUser, "updated_at": tx.now}).Error; err != nil {
			return err
		}
		return tx.Audit(Event{Actor: actor, Kind: EventStaffUpdated, Subject: id,
			Payload: StaffUpdatedPayload{SlackUser: &FromTo[string]{From: st.SlackUserID, To: slackUser}}})
	})
}

// StaffBySlack finds the account linked to a Slack user.
func (s *Store) StaffBySlack(ctx context.Context, slackUser string) (*Staff, error) {
	if slackUser == "" {
		return nil, notFound(gorm.ErrRecordNotFound)
	}
	var st Staff
	if err := s.db.WithContext(ctx).Take(&st, "slack_user_id = ?", slackUser).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// StaffWhoMayDecide lists the enabled accounts whose role may decide an
// action that needs the given role, with an email address.
func (s *Store) StaffWhoMayDecide(ctx context.Context, role StaffRole) ([]Staff, error) {
	return staffWhoMayDecide(s.db.WithContext(ctx), role)
}

func staffWhoMayDecide(db *gorm.DB, role StaffRole) ([]Staff, error) {
	var all []Staff
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
func (tx *Tx) StaffWhoMayDecide(role StaffRole) ([]Staff, error) {
	return staffWhoMayDecide(tx.db, role)
}
