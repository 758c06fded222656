package backoffice

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Changes of who may sign, on /staff and the staff API: one admin
// proposes, another approves (agent/accounts). No page or answer here ever
// holds a password or an enrollment link.

// staffFail shows /staff again with what went wrong.
func (s *Office) staffFail(c echo.Context, err error, keep func(*views.StaffView)) error {
	if fault.CodeOf(err) == fault.Internal {
		return err
	}
	v, verr := s.staffView(c)
	if verr != nil {
		return verr
	}
	v.FlashError = sentence(fault.Message(err))
	if keep != nil {
		keep(&v)
	}
	return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.StaffPage(v))
}

// proposed redirects to /staff saying what became of a change.
func proposed(c echo.Context, ch *models.StaffChange) error {
	done := "proposed"
	if ch.Status == models.ChangeDone {
		done = "change-done"
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done="+done))
}

func (s *Office) staffAdd(c echo.Context) error {
	ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.ChangeAdd, Email: c.FormValue("email"),
		Name: c.FormValue("name"), Role: models.StaffRole(c.FormValue("role"))}, currentStaff(c).staff.Actor())
	if err != nil {
		return s.staffFail(c, err, func(v *views.StaffView) {
			v.NewEmail, v.NewName, v.NewRole = c.FormValue("email"), c.FormValue("name"), c.FormValue("role")
		})
	}
	return proposed(c, ch)
}

// accountEmail is the email of the account in the path.
func (s *Office) accountEmail(c echo.Context) (string, error) {
	st, err := s.core.Store.StaffByID(c.Request().Context(), c.Param("id"))
	if err != nil {
		return "", fault.Errorf(fault.NotFound, "no such account")
	}
	return st.Email, nil
}

func (s *Office) staffRole(c echo.Context) error {
	email, err := s.accountEmail(c)
	if err != nil {
		return err
	}
	ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.ChangeRole, Email: email,
		Role: models.StaffRole(c.FormValue("role"))}, currentStaff(c).staff.Actor())
	if err != nil {
		return s.staffFail(c, err, nil)
	}
	return proposed(c, ch)
}

func (s *Office) staffReset(c echo.Context) error {
	email, err := s.accountEmail(c)
	if err != nil {
		return err
	}
	ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.ChangeReset, Email: email}, currentStaff(c).staff.Actor())
	if err != nil {
		return s.staffFail(c, err, nil)
	}
	return proposed(c, ch)
}

// staffDisabled disables at once; enabling again is proposed.
func (s *Office) staffDisabled(c echo.Context) error {
	if !strings.EqualFold(c.FormValue("disabled"), "true") {
		email, err := s.accountEmail(c)
		if err != nil {
			return err
		}
		ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.ChangeEnable, Email: email}, currentStaff(c).staff.Actor())
		if err != nil {
			return s.staffFail(c, err, nil)
		}
		return proposed(c, ch)
	}
	if err := s.core.Accounts.SetDisabled(c.Request().Context(), c.Param("id"), true, currentStaff(c).staff.Actor()); err != nil {
		return s.staffFail(c, err, nil)
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=disabled"))
}

func (s *Office) staffChangeDecide(approve bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, by := c.Request().Context(), currentStaff(c).staff.Actor()
		var ch *models.StaffChange
		var err error
		if approve {
			var sig *models.PasskeySignature
			if sig, err = s.signature(c, s.changeDecision); err == nil {
				ch, err = s.core.Accounts.Approve(ctx, c.Param("id"), by, sig)
			}
		} else {
			ch, err = s.core.Accounts.Reject(ctx, c.Param("id"), c.FormValue("reason"), by)
		}
		if err != nil {
			return s.staffFail(c, err, nil)
		}
		done := "signed"
		switch ch.Status {
		case models.ChangeDone:
			done = "change-done"
		case models.ChangeRejected:
			done = "change-rejected"
		}
		return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done="+done))
	}
}

// The staff API: an admin's staff token proposes, approves and rejects.

type staffChangeRequest struct {
	Kind   string   `json:"kind"`
	Email  string   `json:"email"`
	Role   string   `json:"role"`
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
}

func (s *Office) apiStaffChanges(c echo.Context) error {
	if !mayAdmin(currentStaff(c).staff.Role) {
		return fault.Errorf(fault.Forbidden, "only an admin's token reads staff changes")
	}
	chs, sigs, err := s.core.Accounts.Changes(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]accounts.ChangeView, 0, len(chs))
	for i := range chs {
		out = append(out, accounts.View(&chs[i], sigs[chs[i].ID]))
	}
	return c.JSON(http.StatusOK, map[string]any{"changes": out})
}

func (s *Office) apiStaffChangePropose(c echo.Context) error {
	var req staffChangeRequest
	if err := s.kit.Decode(c, &req); err != nil {
		return err
	}
	ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.StaffChangeKind(req.Kind), Email: req.Email,
		Name: req.Name, Role: models.StaffRole(req.Role), Groups: req.Groups}, currentStaff(c).staff.Actor())
	if err != nil {
		return err
	}
	v, err := s.core.Accounts.Change(c.Request().Context(), ch.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"change": v})
}

type staffRejectRequest struct {
	Reason string `json:"reason"`
}

func (s *Office) apiStaffChangeDecide(approve bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, by := c.Request().Context(), currentStaff(c).staff.Actor()
		var err error
		if approve {
			_, err = s.core.Accounts.Approve(ctx, c.Param("id"), by, nil)
		} else {
			var req staffRejectRequest
			if c.Request().ContentLength != 0 {
				if err := s.kit.Decode(c, &req); err != nil {
					return err
				}
			}
			_, err = s.core.Accounts.Reject(ctx, c.Param("id"), req.Reason, by)
		}
		if err != nil {
			return err
		}
		v, err := s.core.Accounts.Change(ctx, c.Param("id"))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"change": v})
	}
}

// staffChangesInto fills /staff's changes: the waiting ones, with whether
// the admin looking may sign each, and the latest decided.
func (s *Office) staffChangesInto(c echo.Context, v *views.StaffView) error {
	ctx := c.Request().Context()
	chs, sigs, err := s.core.Accounts.Changes(ctx)
	if err != nil {
		return err
	}
	people, err := s.core.Store.PolicyPeople(ctx)
	if err != nil {
		return err
	}
	if people == 0 {
		people = 2
	}
	v.People = people
	v.SendsEmail = s.core.Outbox != nil && s.core.Outbox.SendsEmail()
	v.SignWithPasskey = s.core.Accounts.SignWithPasskey
	if mapping, err := s.core.Accounts.Groups(ctx); err == nil && mapping != nil {
		v.Groups = accounts.FormatGroups(mapping)
	}
	v.SSO = s.sso != nil
	me := currentStaff(c).staff
	for _, ch := range chs {
		row := views.StaffChangeRow{ID: ch.ID, What: whatChange(&ch), Status: string(ch.Status),
			ProposedBy: ch.ProposerName, Needed: max(ch.PeopleNeeded, people), Created: clock(ch.CreatedAt), Reason: ch.Reason, EndedBy: models.ActorName(ch.EndedBy)}
		signed := map[string]bool{ch.ProposedBy: true}
		for _, sg := range sigs[ch.ID] {
			row.ApprovedBy = append(row.ApprovedBy, sg.StaffName)
			signed[sg.StaffID] = true
		}
		row.Signed = len(signed)
		if ch.EndedAt != nil {
			row.Ended = clock(*ch.EndedAt)
		}
		if ch.Status != models.ChangeProposed {
			v.Ended = append(v.Ended, row)
			continue
		}
		switch {
		case ch.ProposedBy == me.ID:
			row.Why = "You proposed it: another admin approves."
		case ch.StaffID == me.ID || ch.Email == me.Email:
			row.Why = "It is about your own account: another admin approves."
		case signed[me.ID]:
			row.Why = "You approved it."
		default:
			row.MayApprove = true
		}
		v.Waiting = append(v.Waiting, row)
	}
	return nil
}

// changeDecision is what approving a staff change signs.
func (s *Office) changeDecision(c echo.Context) (accounts.Decision, error) {
	ch, err := s.core.Store.StaffChange(c.Request().Context(), c.Param("id"))
	if err != nil {
		return accounts.Decision{}, fault.Errorf(fault.NotFound, "no such staff change")
	}
	return accounts.Decision{CallID: ch.Subject(), ArgsHash: ch.Digest(), Verdict: "approve",
		Summary: whatChange(ch)}, nil
}

// whatChange says what a staff change does.
func whatChange(ch *models.StaffChange) string {
	if ch.Kind == models.ChangeGroups {
		return changeWords(string(ch.Kind), "", strings.ReplaceAll(ch.Mapping, "\n", ", "))
	}
	return changeWords(string(ch.Kind), ch.Email, string(ch.Role))
}

// staffGroups is POST /staff/groups: propose a new single sign-on group
// mapping, one GROUP=ROLE a line.
func (s *Office) staffGroups(c echo.Context) error {
	ch, err := s.core.Accounts.Propose(c.Request().Context(), accounts.ChangeRequest{Kind: models.ChangeGroups,
		Groups: []string{c.FormValue("groups")}}, currentStaff(c).staff.Actor())
	if err != nil {
		return s.staffFail(c, err, nil)
	}
	return proposed(c, ch)
}
