package storage

import (
	"context"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// Enrollment links: the one-time way a person sets their own credential.

// ResetCredentials clears an account's password and passkeys, ends its
// sessions and staff API tokens, and voids its unused enrollment links:
// its owner enrolls again.
func (tx *Tx) ResetCredentials(staffID string) error {
	if err := tx.db.Model(&models.Staff{}).Where("id = ?", staffID).Updates(map[string]any{"password_hash": "", "updated_at": tx.now}).Error; err != nil {
		return err
	}
	for _, m := range []any{&models.Session{}, &models.APIToken{}} {
		if err := tx.db.Where("staff_id = ?", staffID).Delete(m).Error; err != nil {
			return err
		}
	}
	if err := tx.db.Model(&models.Passkey{}).Where("staff_id = ? AND removed_at IS NULL", staffID).Update("removed_at", tx.now).Error; err != nil {
		return err
	}
	return tx.voidEnrollments(staffID)
}

func (tx *Tx) voidEnrollments(staffID string) error {
	return tx.db.Model(&models.Enrollment{}).Where("staff_id = ? AND used_at IS NULL", staffID).Update("expires_at", tx.now).Error
}

// AddEnrollment stores a new enrollment link (its token hashed) and voids
// the account's earlier unused ones: only the newest link works.
func (tx *Tx) AddEnrollment(e *models.Enrollment, sent string) error {
	if err := tx.voidEnrollments(e.StaffID); err != nil {
		return err
	}
	e.CreatedAt = tx.now
	if e.ExpiresAt.IsZero() {
		e.ExpiresAt = tx.now.Add(models.EnrollmentTTL)
	}
	if err := tx.db.Create(e).Error; err != nil {
		return err
	}
	exp := e.ExpiresAt
	return tx.Audit(models.Event{Actor: e.CreatedBy, Kind: models.EventStaffEnrollLink, Subject: e.StaffID,
		Payload: models.StaffEnrollPayload{Change: e.ChangeID, Expires: &exp, Purpose: e.Purpose, Sent: sent}})
}

// Enrollment finds a link that still works, with its account; ErrNotFound
// for one that is unknown, used or expired.
func (s *Store) Enrollment(ctx context.Context, tokenHash string) (*models.Enrollment, *models.Staff, error) {
	var e models.Enrollment
	if err := s.db.WithContext(ctx).Take(&e, "token_hash = ? AND used_at IS NULL AND expires_at > ?", tokenHash, s.Now()).Error; err != nil {
		return nil, nil, notFound(err)
	}
	st, err := s.StaffByID(ctx, e.StaffID)
	if err != nil {
		return nil, nil, err
	}
	return &e, st, nil
}

// UseEnrollment spends a link and sets the password it was for, in one
// unit: a link works once, and not after it expired or its account was
// disabled. ErrNotFound when it no longer works.
func (s *Store) UseEnrollment(ctx context.Context, tokenHash, passwordHash string) (*models.Staff, error) {
	return s.useEnrollment(ctx, tokenHash, passwordHash, nil)
}

// UseEnrollmentForPasskey spends a link on a passkey instead of a
// password: the passkey is kept in the same unit. The account's staff id
// must be the link's (staffID), or ErrNotFound.
func (s *Store) UseEnrollmentForPasskey(ctx context.Context, tokenHash, staffID string, k *models.Passkey) (*models.Staff, error) {
	k.StaffID = staffID
	return s.useEnrollment(ctx, tokenHash, "", k)
}

func (s *Store) useEnrollment(ctx context.Context, tokenHash, passwordHash string, k *models.Passkey) (*models.Staff, error) {
	var st *models.Staff
	err := s.Write(ctx, func(tx *Tx) error {
		var e models.Enrollment
		if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&e, "token_hash = ? AND used_at IS NULL AND expires_at > ?", tokenHash, tx.now).Error; err != nil {
			return notFound(err)
		}
		var err error
		if st, err = tx.StaffByID(e.StaffID); err != nil {
			return err
		}
		if st.Disabled || (k != nil && k.StaffID != st.ID) {
			return models.ErrNotFound
		}
		now := tx.now
		res := tx.db.Model(&models.Enrollment{}).Where("id = ? AND used_at IS NULL", e.ID).Update("used_at", now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.ErrNotFound
		}
		// Whoever was signed in as the account before the person set their
		// credential (an old password, a stolen session) is signed out: the
		// person who spent the link is given the one new session.
		if err := tx.EndSessions(st.ID); err != nil {
			return err
		}
		credential := "password"
		if k != nil {
			credential = "passkey"
			k.CreatedAt = now
			if err := tx.db.Create(k).Error; err != nil {
				return err
			}
		} else {
			if err := tx.db.Model(&models.Staff{}).Where("id = ?", st.ID).Updates(map[string]any{"password_hash": passwordHash, "updated_at": now}).Error; err != nil {
				return err
			}
			st.PasswordHash = passwordHash
		}
		return tx.Audit(models.Event{Actor: st.Actor().String(), Kind: models.EventStaffEnrolled, Subject: st.ID,
			Payload: models.StaffEnrollPayload{Change: e.ChangeID, Credential: credential, Purpose: e.Purpose}})
	})
	return st, err
}
