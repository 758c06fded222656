package backoffice

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// Single sign-on with the company's OpenID Provider: the authorization
// code flow with PKCE, through zitadel/oidc's relying party (state and the
// PKCE verifier in encrypted cookies, the ID token's signature, issuer,
// audience and expiry checked by its verifier). The person's role comes
// from their groups (agent/accounts/sso.go).

// SSOConfig is the identity provider Countersign signs staff in with.
type SSOConfig struct {
	Issuer, ClientID, ClientSecret string
	// Name is the provider's name on the sign-in page ("" : the issuer's host).
	Name string
	// Groups map the provider's groups to roles, the first that matches
	// winning: the first instance's flags; then the deployment's mapping,
	// kept in the database and changed by countersigned staff changes.
	// GroupsClaim names the ID token's claim ("groups").
	Groups      []accounts.GroupRole
	GroupsClaim string
	// RedirectURL is this server's callback as the provider knows it:
	// <public url>/login/oidc/callback.
	RedirectURL string
	// Client is the HTTP client that reaches the provider (nil: a 10 s one).
	Client *http.Client
}

// Label is what the sign-in button says after "Sign in with".
func (c *SSOConfig) Label() string {
	if c.Name != "" {
		return c.Name
	}
	if u, err := url.Parse(c.Issuer); err == nil && u.Host != "" {
		return u.Host
	}
	return c.Issuer
}

// sso is the relying party, made at the first sign-in (the provider may
// be down when Countersign starts) and kept once it worked.
type sso struct {
	cfg *SSOConfig
	mu  sync.Mutex
	rp  rp.RelyingParty
}

func (s *Office) relyingParty(ctx context.Context, overTLS bool) (rp.RelyingParty, error) {
	o := s.sso
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rp != nil {
		return o.rp, nil
	}
	hashKey, err := s.core.Store.Secret(ctx, "sso-cookie-hash")
	if err != nil {
		return nil, err
	}
	blockKey, err := s.core.Store.Secret(ctx, "sso-cookie-block")
	if err != nil {
		return nil, err
	}
	hk, _ := hex.DecodeString(hashKey)
	bk, _ := hex.DecodeString(blockKey)
	opts := []httphelper.CookieHandlerOpt{httphelper.WithSameSite(http.SameSiteLaxMode), httphelper.WithMaxAge(600), httphelper.WithPath("/login/oidc")}
	if !overTLS {
		opts = append(opts, httphelper.WithUnsecure())
	}
	cookies := httphelper.NewCookieHandler(hk, bk, opts...)
	client := o.cfg.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	party, err := rp.NewRelyingPartyOIDC(ctx, o.cfg.Issuer, o.cfg.ClientID, o.cfg.ClientSecret, o.cfg.RedirectURL,
		[]string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile, "groups"},
		rp.WithPKCE(cookies), rp.WithHTTPClient(client), rp.WithSigningAlgsFromDiscovery(),
		rp.WithErrorHandler(s.ssoProviderError), rp.WithUnauthorizedHandler(s.ssoRefused))
	if err != nil {
		return nil, fault.Errorf(fault.Unavailable, "the identity provider at %s does not answer (%v); try again, or ask an admin", o.cfg.Issuer, err)
	}
	o.rp = party
	return party, nil
}

// ssoStart is GET /login/oidc: off to the provider, with a fresh state
// that also carries where to go after.
func (s *Office) ssoStart(c echo.Context) error {
	party, err := s.relyingParty(c.Request().Context(), s.kit.OverTLS(c.Request()))
	if err != nil {
		return s.loginFailed(c.Response(), c.Request(), doorkit.HTTPStatus(fault.CodeOf(err)), fault.Message(err))
	}
	next := safeNext(c.QueryParam("next"))
	state := func() string {
		var b [24]byte
		_, _ = rand.Read(b[:])
		return base64.RawURLEncoding.EncodeToString(b[:]) + "." + base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	rp.AuthURLHandler(state, party)(c.Response(), c.Request())
	return nil
}

// ssoCallback is GET /login/oidc/callback: the code is exchanged (with the
// PKCE verifier), the ID token verified, the person signed in with the
// role their groups give.
func (s *Office) ssoCallback(c echo.Context) error {
	party, err := s.relyingParty(c.Request().Context(), s.kit.OverTLS(c.Request()))
	if err != nil {
		return s.loginFailed(c.Response(), c.Request(), doorkit.HTTPStatus(fault.CodeOf(err)), fault.Message(err))
	}
	rp.CodeExchangeHandler(func(w http.ResponseWriter, r *http.Request, tokens *oidc.Tokens[*oidc.IDTokenClaims], state string, _ rp.RelyingParty) {
		s.ssoSignIn(c, tokens.IDTokenClaims, state)
	}, party)(c.Response(), c.Request())
	return nil
}

func (s *Office) ssoSignIn(c echo.Context, claims *oidc.IDTokenClaims, state string) {
	w, r := c.Response(), c.Request()
	id := accounts.Identity{Issuer: claims.Issuer, Subject: claims.Subject, Email: claims.Email, EmailVerified: bool(claims.EmailVerified),
		Name: claims.Name, Groups: claimStrings(claims.Claims[s.sso.cfg.GroupsClaim])}
	mapping, err := s.core.Accounts.Groups(r.Context())
	if err != nil {
		_ = s.loginFailed(w, r, http.StatusServiceUnavailable, "Countersign cannot read its group mapping just now; try again.")
		return
	}
	if mapping == nil {
		mapping = s.sso.cfg.Groups // none kept yet: this instance's flags
	}
	st, err := s.core.Accounts.SSOSignIn(r.Context(), id, mapping)
	if err != nil {
		s.cfg.Log.Warn("single sign-on refused", "subject_hash", shortHash(id.Issuer+" "+id.Subject), "err", fault.Message(err))
		_ = s.loginFailed(w, r, doorkit.HTTPStatus(fault.CodeOf(err)), fault.Message(err))
		return
	}
	if err := s.signIn(c, st); err != nil {
		_ = s.loginFailed(w, r, http.StatusServiceUnavailable, fault.Message(err))
		return
	}
	next := views.PathQueue
	if _, enc, ok := strings.Cut(state, "."); ok {
		if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
			next = safeNext(string(b))
		}
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// claimStrings reads a claim that is a list of strings (or one string).
func claimStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// ssoProviderError is the provider answering with an error (the person
// cancelled, say).
func (s *Office) ssoProviderError(w http.ResponseWriter, r *http.Request, errorType, description, _ string) {
	msg := "The identity provider did not sign you in"
	if description != "" {
		msg += ": " + description
	} else if errorType != "" {
		msg += " (" + errorType + ")"
	}
	_ = s.loginFailed(w, r, http.StatusUnauthorized, msg+".")
}

// ssoRefused is a callback that does not check out: no state cookie (a
// replayed or foreign callback), a code the provider refused, an ID token
// for another audience, expired, or not signed by the provider.
func (s *Office) ssoRefused(w http.ResponseWriter, r *http.Request, description, _ string) {
	s.cfg.Log.Warn("single sign-on callback refused", "why", description)
	if _, err := r.Cookie("state"); errors.Is(err, http.ErrNoCookie) {
		_ = s.loginFailed(w, r, http.StatusUnauthorized, fmt.Sprintf("No sign-in through the identity provider was started at this address (%s) in this browser in the last 10 minutes, "+
			"or it was finished already: sign in again from %s/login.", r.Host, cmp.Or(s.sso.cfg.origin(), "this address")))
		return
	}
	_ = s.loginFailed(w, r, http.StatusUnauthorized, "The sign-in through the identity provider did not check out ("+ssoWhy(description)+"). Try again.")
}

// ssoWhy says in words why a callback was refused, from the library's
// description of it.
func ssoWhy(description string) string {
	d := strings.ToLower(description)
	switch {
	case strings.Contains(d, "state"):
		return "it does not match the sign-in this browser started"
	case strings.Contains(d, "expired"):
		return "the identity provider's answer has expired"
	case strings.Contains(d, "audience"):
		return "the identity provider's answer is for another application"
	case strings.Contains(d, "signature"):
		return "the identity provider's answer is not signed by it"
	case strings.Contains(d, "code"):
		return "the identity provider did not take the sign-in's code: it was used already, or took too long"
	}
	return "the identity provider's answer was refused"
}

// loginFailed shows the sign-in page with what went wrong.
func (s *Office) loginFailed(w http.ResponseWriter, r *http.Request, status int, msg string) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return views.Login(s.loginView("", msg)).Render(r.Context(), w)
}

// loginView is the sign-in page as this server offers it.
func (s *Office) loginView(next, msg string) views.LoginView {
	v := views.LoginView{Next: next, Error: msg, Passwords: !s.cfg.NoPasswordSignIn}
	if s.sso != nil {
		v.SSOLabel, v.SSOPath = s.sso.cfg.Label(), s.sso.cfg.origin()+views.PathLoginOIDC
	}
	return v
}

// origin is where the provider sends people back to (the public URL's
// scheme and host): single sign-on starts there too, whatever address the
// sign-in page was opened at, so that the sign-in's state is kept for the
// host that receives the callback ("" when the redirect URL has none).
func (c *SSOConfig) origin() string {
	u, err := url.Parse(c.RedirectURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
