package storage

import (
	"context"
	"fmt"
	"strings"

	"github.com/countersign/countersign/models"
)

// Staff accounts inside a unit of work: made, read, changed, bound to the
// identity provider; their sessions ended.

// StaffByID reads an account inside the unit of work.
func (tx *Tx) StaffByID(id string) (*models.Staff, error) {
	var st models.Staff
	if err := tx.db.Take(&st, "id = ?", id).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// StaffByEmail reads an account by email inside the unit of work.
func (tx *Tx) StaffByEmail(email string) (*models.Staff, error) {
	var st models.Staff
	if err := tx.db.Take(&st, "email = ?", strings.ToLower(strings.TrimSpace(email))).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// CreateStaff adds an account inside the unit of work; ErrEmailTaken when
// the email has one.
func (tx *Tx) CreateStaff(st *models.Staff, actor, change string) error {
	st.Email = strings.ToLower(strings.TrimSpace(st.Email))
	var n int64
	if err := tx.db.Model(&models.Staff{}).Where("email = ?", st.Email).Count(&n).Error; err != nil {
		return err
	}
	if n > 0 {
		return models.ErrEmailTaken
	}
	st.CreatedAt, st.UpdatedAt = tx.now, tx.now
	if err := tx.db.Create(st).Error; err != nil {
		return fmt.Errorf("create staff: %w", err)
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffCreated, Subject: st.ID,
		Payload: models.StaffCreatedPayload{Change: change, Email: st.Email, Name: st.Name, Role: st.Role, Via: st.Origin}})
}

// UpdateStaff changes an account's role or disabled flag inside the unit
// of work. Disabling ends its sessions and tokens at once.
func (tx *Tx) UpdateStaff(id string, role *models.StaffRole, disabled *bool, actor string) error {
	var st models.Staff
	if err := tx.db.Take(&st, "id = ?", id).Error; err != nil {
		return notFound(err)
	}
	set := map[string]any{"updated_at": tx.now}
	var payload models.StaffUpdatedPayload
	if role != nil && *role != st.Role {
		set["role"] = *role
		payload.Role = &models.FromTo[models.StaffRole]{From: st.Role, To: *role}
	}
	if disabled != nil && *disabled != st.Disabled {
		set["disabled"] = *disabled
		payload.Disabled = disabled
	}
	if payload == (models.StaffUpdatedPayload{}) {
		return nil
	}
	if err := tx.db.Model(&models.Staff{}).Where("id = ?", id).Updates(set).Error; err != nil {
		return err
	}
	if payload.Role != nil || (disabled != nil && *disabled) {
		// A new role or a disabled account: every open session starts over.
		if err := tx.db.Where("staff_id = ?", id).Delete(&models.Session{}).Error; err != nil {
			return err
		}
	}
	if disabled != nil && *disabled {
		if err := tx.db.Where("staff_id = ?", id).Delete(&models.APIToken{}).Error; err != nil {
			return err
		}
		if err := tx.voidEnrollments(id); err != nil {
			return err
		}
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffUpdated, Subject: id, Payload: payload})
}

// EnabledAdmins lists the enabled admins' ids.
func (tx *Tx) EnabledAdmins() (map[string]bool, error) {
	var ids []string
	if err := tx.db.Model(&models.Staff{}).Where("role = ? AND NOT disabled", models.Admin).Pluck("id", &ids).Error; err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// TellHostAccounts passes each account made on the host that admins were
// not told of yet to tell, marking it told, one transaction each.
func (s *Store) TellHostAccounts(ctx context.Context, tell func(tx *Tx, st *models.Staff) error) (int, error) {
	var waiting []models.Staff
	if err := s.db.WithContext(ctx).Where("origin = ? AND told_at IS NULL", models.OriginHost).Order("created_at").Limit(100).Find(&waiting).Error; err != nil {
		return 0, err
	}
	n := 0
	for i := range waiting {
		st := &waiting[i]
		err := s.Write(ctx, func(tx *Tx) error {
			res := tx.db.Model(&models.Staff{}).Where("id = ? AND told_at IS NULL", st.ID).Update("told_at", tx.now)
			if res.Error != nil || res.RowsAffected == 0 {
				return res.Error // another instance told them
			}
			n++
			return tell(tx, st)
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// StaffNames maps every account's id to its name.
func (s *Store) StaffNames(ctx context.Context) (map[string]string, error) {
	var rows []struct{ ID, Name string }
	if err := s.db.WithContext(ctx).Model(&models.Staff{}).Select("id, name").Scan(&rows).Error; err != nil {
		return nil, err
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Name
	}
	return out, nil
}

// StaffBySSOSubject finds the account of an identity provider's subject.
func (tx *Tx) StaffBySSOSubject(subject string) (*models.Staff, error) {
	var st models.Staff
	if err := tx.db.Take(&st, "sso_subject = ?", subject).Error; err != nil {
		return nil, notFound(err)
	}
	return &st, nil
}

// EndSessions ends every session of an account, with an audit event.
func (tx *Tx) EndSessions(staffID string) error {
	res := tx.db.Where("staff_id = ?", staffID).Delete(&models.Session{})
	if res.Error != nil || res.RowsAffected == 0 {
		return res.Error
	}
	return tx.Audit(models.Event{Actor: "system", Kind: models.EventStaffSignedOut, Subject: staffID, Payload: models.StaffSessionPayload{}})
}

// SetSSO binds an account to its identity provider's subject and sets the
// role its groups give now (a new role ends its other sessions).
func (tx *Tx) SetSSO(st *models.Staff, subject string, role models.StaffRole, actor string) error {
	if st.SSOSubject != subject {
		if err := tx.db.Model(&models.Staff{}).Where("id = ?", st.ID).Updates(map[string]any{"sso_subject": subject, "updated_at": tx.now}).Error; err != nil {
			return err
		}
		st.SSOSubject = subject
	}
	if st.Role == role {
		return nil
	}
	if err := tx.UpdateStaff(st.ID, &role, nil, actor); err != nil {
		return err
	}
	st.Role = role
	return nil
}
