package storage

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/models"
)

// Passkeys: the credentials that sign, and the verdicts signed with them.

// Passkeys lists an account's passkeys that work, oldest first.
func (s *Store) Passkeys(ctx context.Context, staffID string) ([]models.Passkey, error) {
	var out []models.Passkey
	err := s.db.WithContext(ctx).Where("staff_id = ? AND removed_at IS NULL", staffID).Order("created_at, id").Find(&out).Error
	return out, err
}

// PasskeyByID reads one passkey, removed or not.
func (s *Store) PasskeyByID(ctx context.Context, id string) (*models.Passkey, error) {
	var k models.Passkey
	if err := s.db.WithContext(ctx).Take(&k, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &k, nil
}

// AddPasskey keeps a registered passkey, with its audit event.
func (s *Store) AddPasskey(ctx context.Context, k *models.Passkey, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		k.CreatedAt = tx.now
		if err := tx.db.Create(k).Error; err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffPasskeyAdded, Subject: k.StaffID, Payload: models.StaffPasskeyPayload{Passkey: k.ID, Name: k.Name}})
	})
}

// RemovePasskey stops an account's passkey working (its record stays, to
// check what it signed); ErrConflict when it is the
// account's last way to sign in (otherCredential says whether it has one
// besides passkeys).
func (s *Store) RemovePasskey(ctx context.Context, staffID, id string, otherCredential bool, actor string) error {
	return s.Write(ctx, func(tx *Tx) error {
		var n int64
		if err := tx.db.Model(&models.Passkey{}).Where("staff_id = ? AND removed_at IS NULL", staffID).Count(&n).Error; err != nil {
			return err
		}
		res := tx.db.Model(&models.Passkey{}).Where("id = ? AND staff_id = ? AND removed_at IS NULL", id, staffID).Update("removed_at", tx.now)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return models.ErrNotFound
		}
		if n <= 1 && !otherCredential {
			return models.ErrConflict
		}
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffPasskeyRemoved, Subject: staffID, Payload: models.StaffPasskeyPayload{Passkey: id}})
	})
}

// PasskeyUsed keeps a passkey's record after a use (its counter).
func (s *Store) PasskeyUsed(ctx context.Context, id, credential string) error {
	return s.db.WithContext(ctx).Model(&models.Passkey{}).Where("id = ?", id).
		Updates(map[string]any{"credential": credential, "last_used_at": s.Now()}).Error
}

// PasskeyApprovals lists every verdict kept with a passkey signature, with
// the call's id, for audit verify.
func (s *Store) PasskeyApprovals(ctx context.Context, fn func(a *models.Approval) error) error {
	rows, err := s.db.WithContext(ctx).Model(&models.Approval{}).Where("passkey <> ''").Order("id").Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a models.Approval
		if err := s.db.ScanRows(rows, &a); err != nil {
			return err
		}
		if err := fn(&a); err != nil {
			return err
		}
	}
	return rows.Err()
}

// SignedAdminApproval is an admin's passkey-signed approval of a policy
// version or a staff change, with what it approved.
type SignedAdminApproval struct {
	What      string // "policy version 12", "staff change chg_…"
	StaffID   string
	StaffName string
	Subject   string // as the signature names it
	Digest    string // the version's text hash, the change's digest
	Passkey   string
}

// SignedAdminApprovals lists the admins' passkey-signed approvals.
func (s *Store) SignedAdminApprovals(ctx context.Context) ([]SignedAdminApproval, error) {
	db := s.db.WithContext(ctx)
	var out []SignedAdminApproval
	var ps []struct {
		VersionID          int64
		StaffID, StaffName string
		Passkey, Hash      string
	}
	if err := db.Raw(`SELECT s.version_id, s.staff_id, s.staff_name, s.passkey, v.hash FROM policy_signatures s
		JOIN policy_versions v ON v.id = s.version_id WHERE s.passkey <> '' ORDER BY s.id`).Scan(&ps).Error; err != nil {
		return nil, err
	}
	for _, p := range ps {
		out = append(out, SignedAdminApproval{What: fmt.Sprintf("policy version %d", p.VersionID), StaffID: p.StaffID, StaffName: p.StaffName,
			Subject: models.PolicySubject(p.VersionID), Digest: p.Hash, Passkey: p.Passkey})
	}
	var sigs []models.StaffChangeSignature
	if err := db.Where("passkey <> ''").Order("id").Find(&sigs).Error; err != nil {
		return nil, err
	}
	for _, sg := range sigs {
		var ch models.StaffChange
		if err := db.Take(&ch, "id = ?", sg.ChangeID).Error; err != nil {
			return nil, err
		}
		out = append(out, SignedAdminApproval{What: "staff change " + ch.ID, StaffID: sg.StaffID, StaffName: sg.StaffName,
			Subject: ch.Subject(), Digest: ch.Digest(), Passkey: sg.Passkey})
	}
	return out, nil
}
