package web

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/views"
)

type staffCtxKey struct{}

type staffCtx struct {
	staff  *models.Staff
	sess   *models.Session
	cookie string
}

func (s *Server) sessionCookieName(r *http.Request) string {
	if s.overTLS(r) {
		return "__Host-cs_session"
	}
	return "cs_session"
}

// loadStaff finds the signed-in staff member, if any, and puts them and the
// CSRF token on the request context.
func (s *Server) loadStaff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		info := views.RequestInfo{Path: r.URL.Path}
		if ck, err := r.Cookie(s.sessionCookieName(r)); err == nil && ck.Value != "" {
			if sess, st, err := s.cfg.Accounts.Session(r.Context(), ck.Value); err == nil {
				ctx := context.WithValue(r.Context(), staffCtxKey{}, &staffCtx{staff: st, sess: sess, cookie: ck.Value})
				info.StaffName, info.StaffRole, info.CSRF = st.Name, st.Role, sess.CSRFToken
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

// Role sets for routes.
var (
	anyStaff     = []agent.Role{agent.RoleApprover, agent.RoleSupervisor, agent.RoleAuditor, agent.RoleAdmin}
	deciderRoles = []agent.Role{agent.RoleApprover, agent.RoleSupervisor, agent.RoleAdmin}
	adminsOnly   = []agent.Role{agent.RoleAdmin}
)

// requireRole lets through only signed-in staff with one of the roles.
// Pages send strangers to the sign-in page; everything else gets a status.
func (s *Server) requireRole(roles ...agent.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sc := currentStaff(c)
			if sc == nil {
				if c.Request().Method == http.MethodGet && !strings.HasSuffix(c.Request().URL.Path, "/events") {
					return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
				}
				return agent.Errorf(agent.CodeUnauthorized, "please sign in")
			}
			for _, r := range roles {
				if agent.Role(sc.staff.Role) == r {
					return next(c)
				}
			}
			return agent.Errorf(agent.CodeForbidden, "the %s role cannot use this page", sc.staff.Role)
		}
	}
}

// checkCSRF refuses a state-changing request without the session's token
// (form field "csrf" or header X-CSRF-Token).
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		sc := currentStaff(c)
		if sc == nil {
			return agent.Errorf(agent.CodeUnauthorized, "please sign in")
		}
		got := c.Request().Header.Get("X-CSRF-Token")
		if got == "" {
			got = c.FormValue("csrf")
		}
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sc.sess.CSRFToken)) != 1 {
			return agent.Errorf(agent.CodeForbidden, "this form has expired or did not come from Countersign; reload the page and try again")
		}
		return next(c)
	}
}

// securityHeaders sets the back office's headers: no inline script, no
// framing, no sniffing, no referrer leaks.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if h.Get("Content-Security-Policy") == "" {
			h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		if h.Get("X-Frame-Options") == "" && !strings.HasPrefix(c.Request().URL.Path, "/chat") {
			h.Set("X-Frame-Options", "DENY")
		}
		return next(c)
	}
}

// loginLimiter allows a few attempts per minute per client address and per
// email, so passwords cannot be guessed at speed.
type loginLimiter struct {
	mu      sync.Mutex
	byKey   map[string]*rate.Limiter
	cleaned time.Time
}

func newLoginLimiter() *loginLimiter { return &loginLimiter{byKey: map[string]*rate.Limiter{}} }

func (l *loginLimiter) allow(keys ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.cleaned) > 10*time.Minute {
		l.byKey = map[string]*rate.Limiter{} // forget old clients
		l.cleaned = time.Now()
	}
	ok := true
	for _, k := range keys {
		lim := l.byKey[k]
		if lim == nil {
			lim = rate.NewLimiter(rate.Every(12*time.Second), 5) // 5 at once, then 5 a minute
			l.byKey[k] = lim
		}
		if !lim.Allow() {
			ok = false
		}
	}
	return ok
}

func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/queue"
	}
	return next
}

func (s *Server) loginPage(c echo.Context) error {
	if currentStaff(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return render(c, http.StatusOK, views.Login(views.LoginView{Next: c.QueryParam("next")}))
}

func (s *Server) login(c echo.Context) error {
	// No session yet, so no CSRF token: refuse cross-site posts by origin.
	if o := c.Request().Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != s.publicHost(c.Request()) {
			return agent.Errorf(agent.CodeForbidden, "sign in from Countersign's own page")
		}
	}
	email := strings.TrimSpace(c.FormValue("email"))
	next := c.FormValue("next")
	fail := func(status int, msg string) error {
		return render(c, status, views.Login(views.LoginView{Email: email, Next: next, Error: msg}))
	}
	if !s.logins.allow("ip:"+c.RealIP(), "email:"+strings.ToLower(email)) {
		return fail(http.StatusTooManyRequests, "Too many attempts. Wait a minute and try again.")
	}
	st, err := s.cfg.Accounts.Authenticate(c.Request().Context(), email, c.FormValue("password"))
	if err != nil {
		return fail(statusForCode(agent.ErrorCode(err)), agent.ErrorMessage(err))
	}
	// A new session id at every sign-in: a planted cookie never becomes valid.
	if ck, err := c.Cookie(s.sessionCookieName(c.Request())); err == nil && ck.Value != "" {
		_ = s.cfg.Store.DeleteSession(c.Request().Context(), agent.HashToken(ck.Value), "system")
	}
	cookie, err := s.cfg.Accounts.StartSession(c.Request().Context(), st)
	if err != nil {
		return err
	}
	s.setSessionCookie(c, cookie, int(s.cfg.Accounts.AbsoluteTimeout.Seconds()))
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Server) setSessionCookie(c echo.Context, value string, maxAge int) {
	r := c.Request()
	c.SetCookie(&http.Cookie{Name: s.sessionCookieName(r), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.overTLS(r), SameSite: http.SameSiteLaxMode})
}

func (s *Server) logout(c echo.Context) error {
	if sc := currentStaff(c); sc != nil {
		if err := s.cfg.Accounts.EndSession(c.Request().Context(), sc.cookie, sc.staff); err != nil {
			return err
		}
	}
	s.setSessionCookie(c, "", -1)
	return c.Redirect(http.StatusSeeOther, "/login")
}
