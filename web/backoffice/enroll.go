package backoffice

import (
	"net"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// An enrollment link (agent/accounts/enroll.go): its owner sets their own
// password, or registers a passkey, and is signed in. The token in the
// path is the link's secret: the page is never cached, sends referrers to
// this site alone, and the request log writes the path without it
// (middleware.go).

// noStore keeps the link's page out of caches. Referrers stay same-origin
// (securityHeaders): no other site learns the link, and the page's own
// posts keep their Origin (no-referrer would send "Origin: null", which
// the origin check refuses).
func noStore(c echo.Context) {
	c.Response().Header().Set("Cache-Control", "no-store")
}

func (s *Office) enrollPage(c echo.Context) error {
	noStore(c)
	e, st, err := s.core.Accounts.Enrollment(c.Request().Context(), c.Param("token"))
	if err != nil {
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.Enroll(views.EnrollView{Error: fault.Message(err), Dead: true}))
	}
	return render(c, http.StatusOK, views.Enroll(s.enrollView(c, e, st)))
}

func (s *Office) enrollView(c echo.Context, e *models.Enrollment, st *models.Staff) views.EnrollView {
	path := accounts.EnrollPath(c.Param("token"))
	return views.EnrollView{Action: path, Name: st.Name, Email: st.Email, Role: string(st.Role),
		Reset: e.Purpose == "reset", Expires: clock(e.ExpiresAt), MinLength: accounts.MinPasswordLength,
		Passwords: !s.cfg.NoPasswordSignIn, PasskeyAction: path + "/passkey", PasskeyOptions: path + "/passkey/options",
		AtIP: atIPAddress(c.Request().Host)}
}

// atIPAddress says whether a request's Host is an IP address (with or
// without a port), where browsers make no passkeys.
func atIPAddress(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return net.ParseIP(strings.Trim(host, "[]")) != nil
}

// enrollPasskeyBegin starts registering a passkey through the link.
func (s *Office) enrollPasskeyBegin(c echo.Context) error {
	noStore(c)
	if err := s.sameOrigin(c); err != nil {
		return ceremonyJSON(c, nil, "", err)
	}
	opts, state, err := s.core.Accounts.BeginEnrollPasskey(c.Request().Context(), c.Param("token"), s.passkeyRP(c.Request()))
	return ceremonyJSON(c, opts, state, err)
}

// enrollPasskey spends the link on the passkey, and signs the person in.
func (s *Office) enrollPasskey(c echo.Context) error {
	noStore(c)
	if err := s.sameOrigin(c); err != nil {
		return err
	}
	st, err := s.core.Accounts.EnrollPasskey(c.Request().Context(), c.Param("token"), c.FormValue("state"), []byte(c.FormValue("credential")), c.FormValue("name"))
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.Enroll(views.EnrollView{Error: fault.Message(err), Dead: true}))
	}
	return s.enrolled(c, st)
}

// enrolled starts the session of a person who just enrolled.
func (s *Office) enrolled(c echo.Context, st *models.Staff) error {
	if err := s.signIn(c, st); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.PathQueue)
}

func (s *Office) enroll(c echo.Context) error {
	noStore(c)
	// No session yet, so no CSRF token: the link's secret is in the path,
	// and a post from another site is refused by its origin, as at sign-in.
	if err := s.sameOrigin(c); err != nil {
		return err
	}
	if s.cfg.NoPasswordSignIn {
		return fault.Errorf(fault.Forbidden, "password sign-in is off here: add a passkey with this link instead")
	}
	if !s.loginIP.Allow(c.RealIP()) {
		return render(c, http.StatusTooManyRequests, views.Enroll(views.EnrollView{Error: "Too many attempts. Wait a minute and try again.", Dead: true}))
	}
	ctx := c.Request().Context()
	st, err := s.core.Accounts.Enroll(ctx, c.Param("token"), c.FormValue("password"), c.FormValue("again"))
	if err != nil {
		if fault.CodeOf(err) == fault.Invalid {
			if e, owner, lerr := s.core.Accounts.Enrollment(ctx, c.Param("token")); lerr == nil {
				v := s.enrollView(c, e, owner)
				v.Error = sentence(fault.Message(err))
				return render(c, http.StatusUnprocessableEntity, views.Enroll(v))
			}
		}
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.Enroll(views.EnrollView{Error: fault.Message(err), Dead: true}))
	}
	return s.enrolled(c, st)
}

// personPage is how an account came to be able to sign: for everyone who
// reads the audit, one click from every approval.
func (s *Office) personPage(c echo.Context) error {
	l, err := s.core.Accounts.LineageOf(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	st := l.Staff
	v := views.PersonView{Name: st.Name, Email: st.Email, Role: string(st.Role), Disabled: st.Disabled, Origin: originWords(st.Origin),
		Created: clock(st.CreatedAt)}
	for _, ch := range l.Changes {
		step := views.LineageStep{What: changeWords(ch.Kind, ch.Email, ch.Role), ProposedBy: ch.ProposedBy, ProposedByURL: views.Reverse(views.PathPerson, ch.ProposedByID),
			Proposed: clock(ch.CreatedAt)}
		if ch.EndedAt != nil {
			step.Done = clock(*ch.EndedAt)
		}
		for _, sg := range ch.ApprovedBy {
			step.ApprovedBy = append(step.ApprovedBy, views.PersonLink{Name: sg.Name, URL: views.Reverse(views.PathPerson, sg.StaffID)})
		}
		if len(ch.ApprovedBy) == 0 {
			step.AtOnce = true
		}
		v.Steps = append(v.Steps, step)
	}
	return render(c, http.StatusOK, views.Person(v))
}

// originWords says how an account came to be.
func originWords(origin string) string {
	switch origin {
	case models.OriginHost:
		return "made on the host (countersign user add): nobody countersigned it"
	case models.OriginChange:
		return "added by a countersigned staff change"
	case models.OriginDemo:
		return "made by the demo's seed"
	case models.OriginSSO:
		return "signed in through the company's single sign-on"
	}
	return "made before staff changes were countersigned (by one admin, or on the host)"
}

// changeWords says what a staff change does.
func changeWords(kind, email, role string) string {
	switch models.StaffChangeKind(kind) {
	case models.ChangeAdd:
		return "add " + email + " as " + role
	case models.ChangeRole:
		return "make " + email + " " + role
	case models.ChangeEnable:
		return "enable " + email + " again"
	case models.ChangeReset:
		return "reset the password and passkeys of " + email
	case models.ChangeGroups:
		return "map single sign-on groups: " + role
	}
	return kind + " " + email
}

// personURL is the lineage page of a staff account ("" for an actor that
// is no account).
func personURL(staffID string) string {
	if !strings.HasPrefix(staffID, "stf_") {
		return ""
	}
	return views.Reverse(views.PathPerson, staffID)
}
