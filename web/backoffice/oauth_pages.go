package backoffice

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/countersign/countersign/web/oauth"
)

// oauthServer is the authorization server of /mcp (web/oauth's door).
func (s *Office) oauthServer(c echo.Context) (*oauth.Server, error) {
	return s.oauth.Server(c.Request().Context())
}

// oauthConsentPage shows an admin what asks for access.
func (s *Office) oauthConsentPage(c echo.Context) error {
	srv, err := s.oauthServer(c)
	if err != nil {
		return err
	}
	p, err := srv.Pending(c.Request().Context(), c.QueryParam("id"))
	if err != nil {
		return fault.Errorf(fault.NotFound, "%s", err.Error())
	}
	v, err := s.consentView(c, p)
	if err != nil {
		return err
	}
	allowRedirect(c, p.RedirectURI)
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, http.StatusOK, views.OAuthConsent(v))
}

// allowRedirect lets the consent form's answer end at the client's
// redirect: a browser holds a form's redirects to the page's form-action,
// which is otherwise this server alone.
func allowRedirect(c echo.Context, redirect string) {
	u, err := url.Parse(redirect)
	if err != nil || u.Scheme == "" {
		return
	}
	source := u.Scheme + ":"
	if u.Host != "" {
		source = u.Scheme + "://" + u.Host
	}
	if strings.ContainsAny(source, " ;,'\"") {
		return
	}
	c.Response().Header().Set("Content-Security-Policy", backOfficeCSP(source))
}

func (s *Office) consentView(c echo.Context, p *oauth.Pending) (views.OAuthConsentView, error) {
	v := views.OAuthConsentView{RequestID: p.RequestID, ClientID: p.ClientID, ClientName: p.ClientName, ClientURI: p.ClientURI,
		RedirectURI: p.RedirectURI, NewName: agentNameFor(p.ClientName)}
	agents, err := s.core.Store.Agents(c.Request().Context())
	if err != nil {
		return v, err
	}
	for _, a := range agents {
		if a.RevokedAt == nil {
			v.Agents = append(v.Agents, a.Name)
			if a.ID == p.AgentID {
				v.Current = a.Name
			}
		}
	}
	return v, nil
}

// agentNameFor suggests an agent's name from a client's: letters, digits,
// '.', '_' and '-'.
func agentNameFor(client string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(client) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ' && b.Len() > 0:
			b.WriteByte('-')
		}
		if b.Len() >= 60 {
			break
		}
	}
	if b.Len() == 0 {
		return "mcp-client"
	}
	return strings.Trim(b.String(), "-")
}

// oauthConsent is the admin's answer: authorize the client as a new or an
// existing outside agent (audited as theirs), or deny it.
func (s *Office) oauthConsent(c echo.Context) error {
	srv, err := s.oauthServer(c)
	if err != nil {
		return err
	}
	ctx, r, id := c.Request().Context(), c.Request(), c.FormValue("id")
	if c.FormValue("decision") == "deny" {
		to, err := srv.Deny(ctx, r, id)
		if err != nil {
			return fault.Errorf(fault.NotFound, "%s", err.Error())
		}
		return c.Redirect(http.StatusSeeOther, to)
	}
	p, err := srv.Pending(ctx, id)
	if err != nil {
		return fault.Errorf(fault.NotFound, "%s", err.Error())
	}
	actor := currentStaff(c).staff.Actor()
	var ag *models.Agent
	if c.FormValue("as") == "existing" {
		ag, err = s.core.Store.AgentByName(ctx, c.FormValue("agent"))
		if err == nil && ag.RevokedAt != nil {
			err = models.ErrNotFound
		}
		if err != nil {
			err = fault.Errorf(fault.Invalid, "there is no agent named %q that is not revoked", c.FormValue("agent"))
		}
	} else {
		_, ag, err = s.core.Accounts.AddAgent(ctx, c.FormValue("name"), actor)
	}
	if err != nil {
		if fault.CodeOf(err) == fault.Internal {
			return err
		}
		v, verr := s.consentView(c, p)
		if verr != nil {
			return verr
		}
		v.Error, v.NewName = sentence(fault.Message(err)), c.FormValue("name")
		allowRedirect(c, p.RedirectURI)
		return render(c, doorkit.HTTPStatus(fault.CodeOf(err)), views.OAuthConsent(v))
	}
	to, err := srv.Approve(ctx, r, id, actor, ag.ID)
	if err != nil {
		return fault.Wrap(err, "the client could not be authorized")
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// oauthClientRevoke ends an authorized client and its tokens at once.
func (s *Office) oauthClientRevoke(c echo.Context) error {
	err := s.core.Store.RevokeOAuthClient(c.Request().Context(), c.Param("id"), currentStaff(c).staff.Actor())
	if errors.Is(err, models.ErrNotFound) {
		return fault.Errorf(fault.NotFound, "no such client, or it was already revoked")
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, views.WithQuery(views.PathStaff, "done=oauth-revoked"))
}

// oauthClientRows is the authorized MCP clients, with the agent each acts
// as and the admin who authorized it.
func (s *Office) oauthClientRows(c echo.Context, agents []models.Agent, staff []models.Staff) ([]views.OAuthClientRow, error) {
	clients, err := s.core.Store.OAuthClients(c.Request().Context())
	if err != nil {
		return nil, err
	}
	agentName := map[string]string{}
	for _, a := range agents {
		agentName[a.ID] = a.Name
	}
	staffName := map[string]string{}
	for _, st := range staff {
		staffName[st.ID] = st.Name
	}
	var rows []views.OAuthClientRow
	for _, cl := range clients {
		var redirects []string
		_ = json.Unmarshal([]byte(cl.RedirectURIs), &redirects)
		row := views.OAuthClientRow{ID: cl.ID, Name: cl.Name, Redirects: strings.Join(redirects, " "), Agent: agentName[cl.AgentID],
			AuthorizedBy: staffName[cl.AuthorizedBy]}
		if cl.AuthorizedAt != nil {
			row.AuthorizedAt = clock(*cl.AuthorizedAt)
		}
		if cl.RevokedAt != nil {
			row.Revoked, row.State = true, "revoked "+clock(*cl.RevokedAt)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
