package storage

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm/clause"
)

// Staff changes and their signatures. The rules (who may
// propose and approve, when a change is done) are agent/accounts'; these
// are the rows, inside a unit of work.

// AddStaffChange stores a proposed change, with its audit event.
func (tx *Tx) AddStaffChange(ch *models.StaffChange, actor string) error {
	ch.CreatedAt, ch.Status = tx.now, models.ChangeProposed
	if err := tx.db.Create(ch).Error; err != nil {
		return fmt.Errorf("store the staff change: %w", err)
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffChangeProposed, Subject: ch.ID, Payload: changePayload(ch)})
}

func changePayload(ch *models.StaffChange) models.StaffChangePayload {
	return models.StaffChangePayload{Account: ch.StaffID, Email: ch.Email, Kind: ch.Kind, PeopleNeeded: ch.PeopleNeeded, Role: ch.Role}
}

// StaffChangeLocked reads a change to decide it (locked on PostgreSQL until
// the unit ends, so two approvals are counted one after the other).
func (tx *Tx) StaffChangeLocked(id string) (*models.StaffChange, error) {
	var ch models.StaffChange
	if err := tx.db.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&ch, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &ch, nil
}

// ProposedStaffChange is the change still proposed about an email, or nil.
func (tx *Tx) ProposedStaffChange(email string, kind models.StaffChangeKind) (*models.StaffChange, error) {
	var out []models.StaffChange
	err := tx.db.Where("email = ? AND kind = ? AND status = ?", email, kind, models.ChangeProposed).Limit(1).Find(&out).Error
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// SignStaffChange records an admin's approval; ErrConflict when they signed
// it already.
func (tx *Tx) SignStaffChange(sg *models.StaffChangeSignature, signed int) error {
	var n int64
	if err := tx.db.Model(&models.StaffChangeSignature{}).Where("change_id = ? AND staff_id = ?", sg.ChangeID, sg.StaffID).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return models.ErrConflict
	}
	sg.CreatedAt = tx.now
	if err := tx.db.Create(sg).Error; err != nil {
		return err
	}
	return tx.Audit(models.Event{Actor: "staff:" + sg.StaffID + " (" + sg.StaffName + ")", Kind: models.EventStaffChangeSigned, Subject: sg.ChangeID,
		Payload: models.StaffChangeSignedPayload{Signed: signed}})
}

// StaffChangeSignatures are the approvals of a change, oldest first.
func (tx *Tx) StaffChangeSignatures(id string) ([]models.StaffChangeSignature, error) {
	var out []models.StaffChangeSignature
	err := tx.db.Where("change_id = ?", id).Order("id").Find(&out).Error
	return out, err
}

// EndStaffChange marks a proposed change done or rejected, with its audit
// event; ErrConflict when it was no longer proposed.
func (tx *Tx) EndStaffChange(ch *models.StaffChange, status models.StaffChangeStatus, reason, actor string) error {
	now := tx.now
	res := tx.db.Model(&models.StaffChange{}).Where("id = ? AND status = ?", ch.ID, models.ChangeProposed).
		Updates(map[string]any{"status": status, "reason": reason, "ended_by": actor, "ended_at": now, "staff_id": ch.StaffID})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return models.ErrConflict
	}
	ch.Status, ch.Reason, ch.EndedBy, ch.EndedAt = status, reason, actor, &now
	if status == models.ChangeRejected {
		return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffChangeRejected, Subject: ch.ID, Payload: models.StaffChangeRejectedPayload{Reason: reason}})
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffChangeDone, Subject: ch.ID, Payload: changePayload(ch)})
}

// StaffChanges lists the changes, the proposed ones first, then the latest
// that ended (limit of those).
func (s *Store) StaffChanges(ctx context.Context, limit int) ([]models.StaffChange, error) {
	db := s.db.WithContext(ctx)
	var open, ended []models.StaffChange
	if err := db.Where("status = ?", models.ChangeProposed).Order("created_at, id").Find(&open).Error; err != nil {
		return nil, err
	}
	if err := db.Where("status <> ?", models.ChangeProposed).Order("ended_at DESC, id DESC").Limit(limit).Find(&ended).Error; err != nil {
		return nil, err
	}
	return append(open, ended...), nil
}

// StaffChange reads one change.
func (s *Store) StaffChange(ctx context.Context, id string) (*models.StaffChange, error) {
	var ch models.StaffChange
	if err := s.db.WithContext(ctx).Take(&ch, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &ch, nil
}

// StaffChangeSignaturesOf are the approvals of the changes given, by change.
func (s *Store) StaffChangeSignaturesOf(ctx context.Context, ids []string) (map[string][]models.StaffChangeSignature, error) {
	out := map[string][]models.StaffChangeSignature{}
	if len(ids) == 0 {
		return out, nil
	}
	var all []models.StaffChangeSignature
	if err := s.db.WithContext(ctx).Where("change_id IN ?", ids).Order("id").Find(&all).Error; err != nil {
		return nil, err
	}
	for _, sg := range all {
		out[sg.ChangeID] = append(out[sg.ChangeID], sg)
	}
	return out, nil
}

// StaffChangesAbout are the changes that took effect on an account, oldest
// first: how it came to be able to sign.
func (s *Store) StaffChangesAbout(ctx context.Context, staffID string) ([]models.StaffChange, error) {
	var out []models.StaffChange
	err := s.db.WithContext(ctx).Where("staff_id = ? AND status = ?", staffID, models.ChangeDone).Order("ended_at, id").Find(&out).Error
	return out, err
}

// StaffProposers maps each account made or raised by a countersigned change
// to the admins who proposed those changes: the pairs /insights watches.
func (s *Store) StaffProposers(ctx context.Context) (map[string][]string, error) {
	var rows []struct{ StaffID, ProposedBy string }
	if err := s.db.WithContext(ctx).Model(&models.StaffChange{}).Select("staff_id, proposed_by").
		Where("status = ? AND kind IN ?", models.ChangeDone, []models.StaffChangeKind{models.ChangeAdd, models.ChangeRole, models.ChangeEnable, models.ChangeReset}).
		Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.StaffID] = append(out[r.StaffID], r.ProposedBy)
	}
	return out, nil
}
