package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Who may sign is countersigned. One admin proposes adding an account,
// raising a role, enabling an account again or resetting someone's
// credentials; it takes effect when enough other admins approve (as many
// people as a policy change needs, the proposer counted; never the
// proposer twice, never the account concerned). Lowering a role and
// disabling take power away and take effect at once. Nobody sets another
// person's password: a new account, and a reset, get a one-time enrollment
// link that reaches its owner alone (enroll.go).

// ChangeRequest is what an admin proposes.
type ChangeRequest struct {
	Kind  models.StaffChangeKind
	Email string
	Name  string
	Role  models.StaffRole
	// Groups is a groups change's new mapping, GROUP=ROLE each.
	Groups []string
}

// Lowers reports whether going from one role to another only takes power
// away: such a change needs no second admin.
func Lowers(from, to models.StaffRole) bool {
	switch {
	case from == to:
		return true
	case from == models.Admin:
		return true
	case from == models.Supervisor:
		return to == models.Approver
	}
	return false
}

// HostActor is who acts through the command line on the host: whoever can
// run it holds the database anyway; what it does is marked as done there.
var HostActor = models.Actor{ID: "cli", Name: "command line"}

// people is how many people sign a staff change in this deployment: the
// number a policy change needs (--policy-people, kept in the database).
func (a *Service) people(ctx context.Context) (int, error) {
	n, err := a.store.PolicyPeople(ctx)
	if err != nil {
		return 0, fault.Wrap(err, "could not read how many people sign a change")
	}
	if n == 0 {
		n = 2
	}
	return n, nil
}

// Propose records a change of who may sign. A change that only takes power
// away (a lower role) is done at once; a deployment where one person signs
// a change (--single-person-shop) does the others at once too.
func (a *Service) Propose(ctx context.Context, req ChangeRequest, by models.Actor) (*models.StaffChange, error) {
	if by.Role != models.Admin || by.ID == "" {
		return nil, fault.Errorf(fault.Forbidden, "only an admin can propose a staff change")
	}
	ch, err := a.checkRequest(ctx, req, by)
	if err != nil {
		return nil, err
	}
	need, err := a.people(ctx)
	if err != nil {
		return nil, err
	}
	ch.PeopleNeeded = need
	atOnce := need <= 1 || (ch.Kind == models.ChangeRole && Lowers(ch.fromRole, ch.Role))
	if atOnce {
		ch.PeopleNeeded = 1
	}
	err = a.store.Write(ctx, func(tx *storage.Tx) error {
		if prior, err := tx.ProposedStaffChange(ch.Email, ch.Kind); err != nil {
			return err
		} else if prior != nil {
			return fault.Errorf(fault.Conflict, "a change of this kind for %s is already proposed (%s): approve or reject it first", ch.Email, prior.ID)
		}
		if err := tx.AddStaffChange(&ch.StaffChange, by.String()); err != nil {
			return err
		}
		if atOnce {
			return a.apply(tx, &ch.StaffChange, by)
		}
		return nil
	})
	if err != nil {
		return nil, changeError(err)
	}
	return &ch.StaffChange, nil
}

// proposal is a change being checked, with the role it replaces.
type proposal struct {
	models.StaffChange
	fromRole models.StaffRole
}

func (a *Service) checkRequest(ctx context.Context, req ChangeRequest, by models.Actor) (*proposal, error) {
	if req.Kind == models.ChangeGroups {
		mapping, err := ParseGroups(req.Groups)
		if err != nil {
			return nil, fault.Errorf(fault.Invalid, "groups: %v", err)
		}
		return &proposal{StaffChange: models.StaffChange{ID: models.NewID("chg"), Kind: req.Kind, ProposedBy: by.ID, ProposerName: by.Name,
			Mapping: FormatGroups(mapping)}}, nil
	}
	email := strings.ToLower(strings.TrimSpace(req.Email))
	var problems []string
	if !req.Kind.Valid() {
		problems = append(problems, fmt.Sprintf("kind %q: use add, role, enable, reset or groups", req.Kind))
	}
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > 200 {
		problems = append(problems, fmt.Sprintf("%q is not an email address", tools.Truncate(email, 80)))
	}
	if (req.Kind == models.ChangeAdd || req.Kind == models.ChangeRole) && !req.Role.Valid() {
		problems = append(problems, fmt.Sprintf("role %q: use approver, supervisor, auditor or admin", req.Role))
	}
	if len(problems) > 0 {
		return nil, fault.Errorf(fault.Invalid, "%s", strings.Join(problems, "; "))
	}
	p := &proposal{StaffChange: models.StaffChange{ID: models.NewID("chg"), Kind: req.Kind, Email: email, ProposedBy: by.ID, ProposerName: by.Name}}
	existing, err := a.store.StaffByEmail(ctx, email)
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return nil, fault.Wrap(err, "could not read the account")
	}
	if req.Kind == models.ChangeAdd {
		if existing != nil {
			return nil, fault.Errorf(fault.Conflict, "%s already has an account", email)
		}
		name := strings.TrimSpace(req.Name)
		if name == "" {
			name = strings.Split(email, "@")[0]
		}
		p.Name, p.Role = tools.Truncate(name, 200), req.Role
		return p, nil
	}
	if existing == nil {
		return nil, fault.Errorf(fault.NotFound, "no account has the email %s", email)
	}
	p.StaffID, p.Name, p.fromRole = existing.ID, existing.Name, existing.Role
	switch req.Kind {
	case models.ChangeRole:
		if existing.ID == by.ID {
			return nil, fault.Errorf(fault.Invalid, "you cannot change your own role")
		}
		if req.Role == existing.Role {
			return nil, fault.Errorf(fault.Invalid, "%s is already %s", email, req.Role)
		}
		p.Role = req.Role
	case models.ChangeEnable:
		if !existing.Disabled {
			return nil, fault.Errorf(fault.Invalid, "%s is not disabled", email)
		}
		p.Role = existing.Role
	case models.ChangeReset:
		p.Role = existing.Role
	}
	return p, nil
}

// Approve adds an admin's signature to a proposed change; when enough
// people have signed, the change takes effect in the same transaction.
func (a *Service) Approve(ctx context.Context, id string, by models.Actor, sig *models.PasskeySignature) (*models.StaffChange, error) {
	if by.Role != models.Admin || by.ID == "" {
		return nil, fault.Errorf(fault.Forbidden, "only an admin can approve a staff change")
	}
	need, err := a.people(ctx)
	if err != nil {
		return nil, err
	}
	var ch *models.StaffChange
	err = a.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		if ch, err = tx.StaffChangeLocked(id); err != nil {
			return err
		}
		if ch.Status != models.ChangeProposed {
			return fault.Errorf(fault.Conflict, "this change is already %s", ch.Status)
		}
		me, err := tx.StaffByID(by.ID)
		if err != nil || me.Disabled || me.Role != models.Admin {
			return fault.Errorf(fault.Forbidden, "only an enabled admin can approve a staff change")
		}
		switch {
		case ch.ProposedBy == by.ID:
			return fault.Errorf(fault.Forbidden, "you proposed this change: another admin approves it")
		case ch.StaffID == by.ID || strings.EqualFold(ch.Email, me.Email):
			return fault.Errorf(fault.Forbidden, "this change is about your own account: another admin approves it")
		}
		sigs, err := tx.StaffChangeSignatures(ch.ID)
		if err != nil {
			return err
		}
		admins, err := tx.EnabledAdmins()
		if err != nil {
			return err
		}
		// Only people who may still sign count: an admin disabled or
		// lowered since signing no longer vouches for the change.
		signed := map[string]bool{}
		if admins[ch.ProposedBy] {
			signed[ch.ProposedBy] = true
		}
		for _, sg := range sigs {
			if admins[sg.StaffID] {
				signed[sg.StaffID] = true
			}
		}
		signed[by.ID] = true
		kept, err := models.SignedOver(sig, a.SignWithPasskey, ch.Subject(), ch.Digest())
		if err != nil {
			return err
		}
		if err := tx.SignStaffChange(&models.StaffChangeSignature{ChangeID: ch.ID, StaffID: by.ID, StaffName: by.Name, Passkey: kept}, len(signed)); err != nil {
			if errors.Is(err, models.ErrConflict) {
				return fault.Errorf(fault.Conflict, "you have already approved this change")
			}
			return err
		}
		if len(signed) < max(ch.PeopleNeeded, need) {
			return nil
		}
		return a.apply(tx, ch, by)
	})
	if err != nil {
		return nil, changeError(err)
	}
	return ch, nil
}

// Reject ends a proposed change without effect: any admin may, the
// proposer too (to withdraw it).
func (a *Service) Reject(ctx context.Context, id, reason string, by models.Actor) (*models.StaffChange, error) {
	if by.Role != models.Admin || by.ID == "" {
		return nil, fault.Errorf(fault.Forbidden, "only an admin can reject a staff change")
	}
	reason = tools.Truncate(strings.TrimSpace(reason), 1000)
	var ch *models.StaffChange
	err := a.store.Write(ctx, func(tx *storage.Tx) error {
		var err error
		if ch, err = tx.StaffChangeLocked(id); err != nil {
			return err
		}
		if ch.Status != models.ChangeProposed {
			return fault.Errorf(fault.Conflict, "this change is already %s", ch.Status)
		}
		return tx.EndStaffChange(ch, models.ChangeRejected, reason, by.String())
	})
	if err != nil {
		return nil, changeError(err)
	}
	return ch, nil
}

// apply makes a change take effect, inside its transaction; the state it
// was proposed against is checked again.
func (a *Service) apply(tx *storage.Tx, ch *models.StaffChange, by models.Actor) error {
	actor := by.String()
	switch ch.Kind {
	case models.ChangeAdd:
		st := &models.Staff{ID: models.NewID("stf"), Email: ch.Email, Name: ch.Name, Role: ch.Role, Origin: models.OriginChange}
		if err := tx.CreateStaff(st, actor, ch.ID); err != nil {
			if errors.Is(err, models.ErrEmailTaken) {
				return fault.Errorf(fault.Conflict, "%s has an account now: reject this change", ch.Email)
			}
			return err
		}
		ch.StaffID = st.ID
		if err := tx.EndStaffChange(ch, models.ChangeDone, "", actor); err != nil {
			return err
		}
		return a.issueEnrollment(tx, st, "new", ch.ID, actor)
	case models.ChangeRole, models.ChangeEnable:
		var role *models.StaffRole
		var disabled *bool
		if ch.Kind == models.ChangeRole {
			role = &ch.Role
		} else {
			off := false
			disabled = &off
		}
		if err := tx.UpdateStaff(ch.StaffID, role, disabled, actor); err != nil {
			return err
		}
		return tx.EndStaffChange(ch, models.ChangeDone, "", actor)
	case models.ChangeGroups:
		if err := tx.SetSSOGroups(ch.Mapping, actor); err != nil {
			return err
		}
		return tx.EndStaffChange(ch, models.ChangeDone, "", actor)
	case models.ChangeReset:
		st, err := tx.StaffByID(ch.StaffID)
		if err != nil {
			return err
		}
		if err := tx.ResetCredentials(st.ID); err != nil {
			return err
		}
		if err := tx.EndStaffChange(ch, models.ChangeDone, "", actor); err != nil {
			return err
		}
		return a.issueEnrollment(tx, st, "reset", ch.ID, actor)
	}
	return fault.Errorf(fault.Invalid, "unknown kind of change %q", ch.Kind)
}

// changeError turns what storage says into words for people.
func changeError(err error) error {
	switch {
	case errors.Is(err, models.ErrNotFound):
		return fault.Errorf(fault.NotFound, "no such staff change or account")
	case errors.Is(err, models.ErrConflict):
		return fault.Errorf(fault.Conflict, "someone else decided this change at the same moment; reload")
	}
	if fault.CodeOf(err) != fault.Internal {
		return err
	}
	return fault.Wrap(err, "could not record the staff change")
}

// Changes lists the staff changes: the proposed ones, then the latest 50
// that ended, each with the admins who approved it.
func (a *Service) Changes(ctx context.Context) ([]models.StaffChange, map[string][]models.StaffChangeSignature, error) {
	chs, err := a.store.StaffChanges(ctx, 50)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(chs))
	for i, ch := range chs {
		ids[i] = ch.ID
	}
	sigs, err := a.store.StaffChangeSignaturesOf(ctx, ids)
	return chs, sigs, err
}

// ChangeView is a staff change as the API shows it: never a password or an
// enrollment link.
type ChangeView struct {
	ID           string       `json:"id"`
	Status       string       `json:"status"`
	Kind         string       `json:"kind"`
	Email        string       `json:"email"`
	Name         string       `json:"name"`
	Role         string       `json:"role"`
	Account      string       `json:"account,omitempty"`
	ProposedBy   string       `json:"proposed_by"`
	ProposedByID string       `json:"proposed_by_id"`
	PeopleNeeded int          `json:"people_needed"`
	ApprovedBy   []ChangeSign `json:"approved_by"`
	Reason       string       `json:"reason,omitempty"`
	EndedBy      string       `json:"ended_by,omitempty"`
	CreatedAt    time.Time    `json:"created_at"`
	EndedAt      *time.Time   `json:"ended_at,omitempty"`
	// Groups is a groups change's mapping, GROUP=ROLE each.
	Groups []string `json:"groups,omitempty"`
}

// ChangeSign is one admin's approval of a staff change.
type ChangeSign struct {
	StaffID string    `json:"staff_id"`
	Name    string    `json:"name"`
	At      time.Time `json:"at"`
}

// View is the change as the API shows it, with its approvals.
func View(ch *models.StaffChange, sigs []models.StaffChangeSignature) ChangeView {
	v := ChangeView{ID: ch.ID, Status: string(ch.Status), Kind: string(ch.Kind), Email: ch.Email, Name: ch.Name, Role: string(ch.Role),
		Account: ch.StaffID, ProposedBy: ch.ProposerName, ProposedByID: ch.ProposedBy, PeopleNeeded: ch.PeopleNeeded, ApprovedBy: []ChangeSign{},
		Reason: ch.Reason, EndedBy: models.ActorName(ch.EndedBy), CreatedAt: ch.CreatedAt, EndedAt: ch.EndedAt}
	if ch.Mapping != "" {
		v.Groups = strings.Split(ch.Mapping, "\n")
	}
	for _, sg := range sigs {
		v.ApprovedBy = append(v.ApprovedBy, ChangeSign{StaffID: sg.StaffID, Name: sg.StaffName, At: sg.CreatedAt})
	}
	return v
}

// Change reads one change as the API shows it.
func (a *Service) Change(ctx context.Context, id string) (ChangeView, error) {
	ch, err := a.store.StaffChange(ctx, id)
	if err != nil {
		return ChangeView{}, changeError(err)
	}
	sigs, err := a.store.StaffChangeSignaturesOf(ctx, []string{id})
	if err != nil {
		return ChangeView{}, err
	}
	return View(ch, sigs[id]), nil
}

// Lineage is how an account came to be able to sign: how it was made, and
// every change that took effect on it, oldest first.
type Lineage struct {
	Staff   *models.Staff
	Changes []ChangeView
}

// LineageOf reads an account's lineage.
func (a *Service) LineageOf(ctx context.Context, staffID string) (Lineage, error) {
	st, err := a.store.StaffByID(ctx, staffID)
	if err != nil {
		return Lineage{}, fault.Errorf(fault.NotFound, "no such account")
	}
	chs, err := a.store.StaffChangesAbout(ctx, staffID)
	if err != nil {
		return Lineage{}, err
	}
	ids := make([]string, len(chs))
	for i, ch := range chs {
		ids[i] = ch.ID
	}
	sigs, err := a.store.StaffChangeSignaturesOf(ctx, ids)
	if err != nil {
		return Lineage{}, err
	}
	l := Lineage{Staff: st}
	for i := range chs {
		l.Changes = append(l.Changes, View(&chs[i], sigs[chs[i].ID]))
	}
	return l, nil
}
