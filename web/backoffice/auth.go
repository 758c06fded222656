package backoffice

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

type staffCtxKey struct{}

type staffCtx struct {
	staff  *models.Staff
	sess   *models.Session
	cookie string
}

func (s *Office) sessionCookieName(r *http.Request) string {
	if s.kit.OverTLS(r) {
		return "__Host-cs_session"
	}
	return "cs_session"
}

// LoadStaff finds the signed-in staff member, if any, and puts them and the
// CSRF token on the request context.
func (s *Office) LoadStaff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		info := views.RequestInfo{Path: r.URL.Path}
		if ck, err := r.Cookie(s.sessionCookieName(r)); err == nil && ck.Value != "" {
			sess, st, err := s.core.Accounts.Session(r.Context(), ck.Value)
			if fault.CodeOf(err) == fault.Unavailable {
				return err // not signed out: the database is away for a moment
			}
			if err == nil {
				ctx := context.WithValue(r.Context(), staffCtxKey{}, &staffCtx{staff: st, sess: sess, cookie: ck.Value})
				info.StaffName, info.StaffRole, info.CSRF = st.Name, string(st.Role), sess.CSRFToken
				info.CanDecide, info.CanSupervise, info.IsAdmin = st.Role.CanDecide(), st.Role.AtLeast(models.Supervisor), st.Role.IsAdmin()
				if info.IsAdmin {
					info.InstancesDiffer = s.instancesDiffer(r.Context())
				}
				r = r.WithContext(ctx)
			}
		}
		c.SetRequest(r.WithContext(views.WithRequestInfo(r.Context(), info)))
		return next(c)
	}
}

func currentStaff(c echo.Context) *staffCtx {
	sc, _ := c.Request().Context().Value(staffCtxKey{}).(*staffCtx)
	return sc
}

// What a route asks of a role (models.StaffRole holds the one list of roles).
var (
	mayRead   = models.StaffRole.Valid
	mayDecide = models.StaffRole.CanDecide
	mayAdmin  = models.StaffRole.IsAdmin
)

// requireRole lets through only signed-in staff whose role may. Pages send
// strangers to the sign-in page; everything else gets a status.
func (s *Office) requireRole(may func(models.StaffRole) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sc := currentStaff(c)
			if sc == nil {
				if c.Request().Method == http.MethodGet && !strings.HasSuffix(c.Request().URL.Path, "/events") {
					return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathLogin, url.Values{"next": {c.Request().URL.RequestURI()}}.Encode()))
				}
				return fault.Errorf(fault.Unauthorized, "please sign in")
			}
			if may(sc.staff.Role) {
				return next(c)
			}
			return fault.Errorf(fault.Forbidden, "the %s role cannot use this page", sc.staff.Role)
		}
	}
}

// sessionOrToken lets a GET be made by a signed-in person or with a staff
// API token (Authorization: Bearer), each checked as it is everywhere
// else: a script fetching an export is not sent to the sign-in page.
func (s *Office) sessionOrToken(may func(models.StaffRole) bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		byToken := s.requireStaffToken(s.apiRequireRole(may)(next))
		bySession := s.requireRole(may)(s.checkCSRF(next))
		return func(c echo.Context) error {
			if strings.HasPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ") {
				return byToken(c)
			}
			return bySession(c)
		}
	}
}

// checkCSRF refuses a state-changing request without the session's token
// (form field "csrf" or header X-CSRF-Token).
func (s *Office) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		sc := currentStaff(c)
		if sc == nil {
			return fault.Errorf(fault.Unauthorized, "please sign in")
		}
		got := c.Request().Header.Get("X-CSRF-Token")
		if got == "" {
			got = c.FormValue("csrf")
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sc.sess.CSRFToken)) != 1 {
			return fault.Errorf(fault.Forbidden, "this form has expired or did not come from Countersign; reload the page and try again")
		}
		return next(c)
	}
}

// backOfficeCSP is the back office's Content-Security-Policy; formTarget
// is one more place its forms may end at ("": this server alone).
func backOfficeCSP(formTarget string) string {
	action := "'self'"
	if formTarget != "" {
		action += " " + formTarget
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action " +
		action + "; object-src 'none'"
}

// SecurityHeaders sets the back office's headers: no inline script, no
// framing, no sniffing, no referrer leaks.
func SecurityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if h.Get("Content-Security-Policy") == "" {
			h.Set("Content-Security-Policy", backOfficeCSP(""))
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if h.Get("X-Frame-Options") == "" && !strings.HasPrefix(c.Request().URL.Path, "/chat") {
			h.Set("X-Frame-Options", "DENY")
		}
		return next(c)
	}
}

// safeNext is where to go after signing in: a path on this site, or the
// queue. Browsers drop tabs and newlines from a Location and read a
// backslash as a slash, so "/\t/evil.example" would leave the site: any
// control character or backslash is refused, and what is kept is rebuilt
// from its parsed path and query, so it cannot name another host.
// maxEmailLength is the longest email address there can be (RFC 5321).
const maxEmailLength = 254

func safeNext(next string) string {
	const home = views.PathQueue
	if next == "" || len(next) > 2048 {
		return home
	}
	for _, r := range next {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return home
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return home
	}
	p := u.EscapedPath()
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return home
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

func (s *Office) loginPage(c echo.Context) error {
	if currentStaff(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return render(c, http.StatusOK, views.Login(s.loginView(c.QueryParam("next"), "")))
}

func (s *Office) login(c echo.Context) error {
	// No session yet, so no CSRF token: refuse cross-site posts by origin.
	// "Origin: null" comes from sandboxed frames and data: pages, which
	// have no business signing anyone in.
	if err := s.sameOrigin(c); err != nil {
		return err
	}
	email := strings.TrimSpace(c.FormValue("email"))
	next := c.FormValue("next")
	fail := func(status int, msg string) error {
		v := s.loginView(next, msg)
		v.Email = email
		return render(c, status, views.Login(v))
	}
	if s.cfg.NoPasswordSignIn {
		return fail(http.StatusForbidden, "Password sign-in is off here: sign in through your company's identity provider.")
	}
	if len(email) > maxEmailLength {
		email = ""
		return fail(http.StatusBadRequest, "That is not a staff email address.")
	}
	// Per address first, then per address and account: failures from other
	// addresses never lock an account out of a sign-in from a new one.
	if !s.loginIP.Allow(c.RealIP()) || !s.loginAccount.Allow(c.RealIP()+"\x00"+strings.ToLower(email)) {
		return fail(http.StatusTooManyRequests, "Too many attempts. Wait a minute and try again.")
	}
	st, err := s.core.Accounts.Authenticate(c.Request().Context(), email, c.FormValue("password"))
	if err != nil {
		return fail(doorkit.HTTPStatus(fault.CodeOf(err)), fault.Message(err))
	}
	if err := s.signIn(c, st); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// signIn starts a session for a person who proved who they are (a
// password, a passkey, the company's provider, an enrollment link). A new
// session id at every sign-in: a planted cookie never becomes valid.
func (s *Office) signIn(c echo.Context, st *models.Staff) error {
	ctx := c.Request().Context()
	if ck, err := c.Cookie(s.sessionCookieName(c.Request())); err == nil && ck.Value != "" {
		_ = s.core.Store.DeleteSession(ctx, models.HashToken(ck.Value), "system")
	}
	cookie, err := s.core.Accounts.StartSession(ctx, st)
	if err != nil {
		return err
	}
	s.setSessionCookie(c, cookie, int(s.core.Accounts.AbsoluteTimeout.Seconds()))
	return nil
}

func (s *Office) setSessionCookie(c echo.Context, value string, maxAge int) {
	r := c.Request()
	c.SetCookie(&http.Cookie{Name: s.sessionCookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.kit.OverTLS(r), SameSite: http.SameSiteLaxMode})
}

func (s *Office) logout(c echo.Context) error {
	if sc := currentStaff(c); sc != nil {
		if err := s.core.Accounts.EndSession(c.Request().Context(), sc.cookie, sc.staff); err != nil {
			return err
		}
	}
	s.setSessionCookie(c, "", -1)
	return c.Redirect(http.StatusSeeOther, views.PathLogin)
}
