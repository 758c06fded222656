package oauth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
)

// DoorOptions is how the OAuth door is set up.
type DoorOptions struct {
	// PublicURL is this server's base URL as clients reach it (empty: the
	// request's scheme and host, a trusted proxy's X-Forwarded-*).
	PublicURL string
	// Documents fetches clients' metadata documents (Config.Documents).
	Documents *http.Client
}

// Door is the OAuth door of /mcp: the authorization server's paths and
// metadata, and the check of the tokens it issued (RequireAgent). The
// consent is the back office's, an admin's (Server gives it the server).
type Door struct {
	kit  *doorkit.Kit
	opts DoorOptions
	// registerIP bounds client registrations per address: anyone may
	// register, nobody may fill the database with clients; authorizeIP
	// bounds authorization requests, each stored until it expires.
	registerIP, authorizeIP *doorkit.Limiter

	// The server is built on first use (its signing key is made once per
	// database, which a test's fresh database should not pay for unless
	// it uses OAuth).
	mu     sync.Mutex
	server *Server
}

// AgentKeyPrefix starts every agent key (accounts.AddAgent).
const AgentKeyPrefix = "csa_"

// Mount adds the authorization server's paths to e.
func Mount(e *echo.Echo, kit *doorkit.Kit, opts DoorOptions) *Door {
	d := &Door{kit: kit, opts: opts,
		registerIP:  kit.Limiter(6*time.Second, 10, "oauth_register"),  // 10 at once, then 10 a minute per address
		authorizeIP: kit.Limiter(2*time.Second, 30, "oauth_authorize"), // 30 at once, then 30 a minute per address
	}
	e.Any("/oauth/*", d.serve)
	e.GET("/.well-known/*", d.serve)
	return d
}

// Server is the authorization server, built when first asked for.
func (d *Door) Server(ctx context.Context) (*Server, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.server != nil {
		return d.server, nil
	}
	srv, err := New(ctx, Config{Store: d.kit.Core.Store, Issuer: d.issuer, Log: d.kit.Log, Documents: d.opts.Documents,
		Consent: func(id string) string { return views.PathOAuthConsent + "?id=" + id }})
	if err != nil {
		return nil, fault.Wrap(err, "the authorization server could not start")
	}
	d.server = srv
	return srv, nil
}

// issuer is this server's base URL as a client reaches it.
func (d *Door) issuer(r *http.Request) string {
	if d.opts.PublicURL != "" {
		return strings.TrimRight(d.opts.PublicURL, "/")
	}
	scheme := "http"
	if d.kit.OverTLS(r) {
		scheme = "https"
	}
	return scheme + "://" + d.kit.PublicHost(r)
}

// serve hands the authorization server's paths to it.
//
// Two ways make a client: registering (POST /oauth/register) and naming a
// metadata document's URL not seen before as the client_id of an
// authorization request. Both take from one limit per address
// (registerIP); every authorization request, which is stored until it
// expires, takes from another (authorizeIP).
func (d *Door) serve(c echo.Context) error {
	r, ip := c.Request(), c.RealIP()
	tooMany := func(what string) error {
		c.Response().Header().Set("Retry-After", "10")
		return c.JSON(http.StatusTooManyRequests, map[string]string{"error": "too_many_requests",
			"error_description": "too many " + what + " from this address; try again in a minute"})
	}
	switch r.URL.Path {
	case PathRegister:
		if r.Method == http.MethodPost && !d.registerIP.Allow(ip) {
			return tooMany("client registrations")
		}
	case PathAuthorize:
		if !d.authorizeIP.Allow(ip) {
			return tooMany("authorization requests")
		}
		if id := r.FormValue("client_id"); strings.HasPrefix(id, "https://") {
			if _, err := d.kit.Core.Store.OAuthClientByID(r.Context(), id); errors.Is(err, models.ErrNotFound) && !d.registerIP.Allow(ip) {
				return tooMany("new clients")
			}
		}
	}
	srv, err := d.Server(r.Context())
	if err != nil {
		return err
	}
	srv.ServeHTTP(c.Response(), c.Request())
	return nil
}

// RequireAgent lets a request in with an agent key or an OAuth access
// token of an authorized client, which acts as its outside agent
// (doorkit.Kit.RequireAgent). An agent key (csa_…) is checked as one and
// nothing else; no token, or a token that is not accepted, is a 401 whose
// WWW-Authenticate says where to get one (RFC 9728) and, for a token, why
// it was not accepted.
func (d *Door) RequireAgent(next echo.HandlerFunc) echo.HandlerFunc {
	byKey := d.kit.RequireAgentKey(next)
	return func(c echo.Context) error {
		r := c.Request()
		token, _ := strings.CutPrefix(r.Header.Get(echo.HeaderAuthorization), "Bearer ")
		token = strings.TrimSpace(token)
		if strings.HasPrefix(token, AgentKeyPrefix) {
			return byKey(c) // an agent key: its own answers, as before OAuth
		}
		srv, err := d.Server(r.Context())
		if err != nil {
			return err
		}
		if token == "" {
			c.Response().Header().Set("WWW-Authenticate", srv.Challenge(r, ""))
			return fault.Errorf(fault.Unauthorized, "send an agent key or an OAuth access token as Authorization: Bearer <token>")
		}
		access, err := srv.Verify(r.Context(), r, token)
		var ag *models.Agent
		if err == nil {
			if ag, err = d.kit.Core.Store.LiveAgent(r.Context(), access.Client.AgentID); err != nil {
				err = errors.New("the agent this client acts as was revoked")
			}
		}
		if err != nil {
			c.Response().Header().Set("WWW-Authenticate", srv.Challenge(r, err.Error()))
			return fault.Errorf(fault.Unauthorized, "this token is not accepted: %s", err.Error())
		}
		via := "OAuth client " + tools.Truncate(access.Client.Name, 60) + ", authorized by " + d.staffName(r.Context(), access.Client.AuthorizedBy)
		c.SetRequest(r.WithContext(gate.WithVia(r.Context(), via)))
		return next(doorkit.WithAgent(c, ag))
	}
}

// staffName names the person who authorized a client, for the record of
// each call it makes.
func (d *Door) staffName(ctx context.Context, id string) string {
	if st, err := d.kit.Core.Store.StaffByID(ctx, id); err == nil {
		return st.Name + " (staff:" + id + ")"
	}
	return "staff:" + id
}
