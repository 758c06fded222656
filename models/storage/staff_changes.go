package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Staff changes, their signatures and enrollment links. The rules (who may
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

// CoSigned is one thing two or more accounts signed: a call that needed
// several approvals, or a policy version (its author counted).
type CoSigned struct {
	Subject string   // a call id, or "policy version N"
	Signers []string // staff ids
}

// CoSignings lists what several accounts signed since a time: calls with
// two or more approvals that needed them, and policy versions with their
// authors (up to 50,000 of each, newest first).
func (s *Store) CoSignings(ctx context.Context, since time.Time) ([]CoSigned, error) {
	db := s.db.WithContext(ctx)
	var calls []struct{ ToolCallID, StaffID string }
	if err := db.Raw(`SELECT a.tool_call_id, a.staff_id FROM approvals a JOIN tool_calls c ON c.id = a.tool_call_id
		WHERE a.verdict = 'approve' AND a.created_at >= ? AND c.required_approvals > 1 ORDER BY a.id DESC LIMIT 50000`, since).Scan(&calls).Error; err != nil {
		return nil, err
	}
	var sigs []struct {
		VersionID int64
		AuthorID  string
		StaffID   string
	}
	if err := db.Raw(`SELECT s.version_id, v.author_id, s.staff_id FROM policy_signatures s JOIN policy_versions v ON v.id = s.version_id
		WHERE s.created_at >= ? ORDER BY s.id DESC LIMIT 50000`, since).Scan(&sigs).Error; err != nil {
		return nil, err
	}
	var out []CoSigned
	at := map[string]int{}
	add := func(subject, who string) {
		if who == "" {
			return
		}
		i, ok := at[subject]
		if !ok {
			i = len(out)
			at[subject] = i
			out = append(out, CoSigned{Subject: subject})
		}
		if !slices.Contains(out[i].Signers, who) {
			out[i].Signers = append(out[i].Signers, who)
		}
	}
	for _, c := range calls {
		add(c.ToolCallID, c.StaffID)
	}
	for _, sg := range sigs {
		subject := fmt.Sprintf("policy version %d", sg.VersionID)
		add(subject, sg.AuthorID)
		add(subject, sg.StaffID)
	}
	return slices.DeleteFunc(out, func(c CoSigned) bool { return len(c.Signers) < 2 }), nil
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

// ssoGroupsKey keeps, among the values the instances share, which single
// sign-on groups give which roles.
const ssoGroupsKey = "sso-groups"

// SSOGroups is the deployment's group mapping (one GROUP=ROLE a line);
// ok is false when none is kept yet.
func (s *Store) SSOGroups(ctx context.Context) (mapping string, ok bool, err error) {
	var got models.SharedSecret
	err = s.db.WithContext(ctx).Take(&got, "name = ?", ssoGroupsKey).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	return got.Value, err == nil, err
}

// SettleSSOGroups keeps mapping as the deployment's when none is kept yet
// (the first instance's --oidc-group, audited as done on its host) and
// returns the one kept.
func (s *Store) SettleSSOGroups(ctx context.Context, mapping, host string) (string, error) {
	var kept string
	err := s.Write(ctx, func(tx *Tx) error {
		var got models.SharedSecret
		err := tx.db.Take(&got, "name = ?", ssoGroupsKey).Error
		if err == nil {
			kept = got.Value
			return nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return err
		}
		kept = mapping
		return tx.setSSOGroups(mapping, "host:"+host)
	})
	return kept, err
}

// SetSSOGroups changes the deployment's group mapping inside the unit (a
// countersigned staff change taking effect).
func (tx *Tx) SetSSOGroups(mapping, actor string) error { return tx.setSSOGroups(mapping, actor) }

func (tx *Tx) setSSOGroups(mapping, actor string) error {
	row := models.SharedSecret{Name: ssoGroupsKey, Value: mapping, CreatedAt: tx.now}
	if err := tx.db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoUpdates: clause.AssignmentColumns([]string{"value"})}).Create(&row).Error; err != nil {
		return err
	}
	return tx.Audit(models.Event{Actor: actor, Kind: models.EventStaffGroupsSet, Subject: ssoGroupsKey, Payload: models.StaffGroupsPayload{Mapping: mapping}})
}
