package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/countersign/countersign/models"
)

// Pending is a client's request waiting for an admin, as the consent page
// shows it.
type Pending struct {
	RequestID, ClientID, ClientName, ClientURI, RedirectURI string
	// AgentID is the outside agent the client already acts as ("" for a
	// client never authorized).
	AgentID string
}

// ErrNoRequest is a consent asked for a request that is gone (expired,
// decided) or never was.
var ErrNoRequest = errors.New("this authorization request is no longer waiting (it expired or was decided); start again from the MCP client")

// Pending reads a request that waits for consent.
func (s *Server) Pending(ctx context.Context, id string) (*Pending, error) {
	var a authRequest
	if err := s.storage.get(ctx, kindRequest, id, &a); err != nil || a.Done() {
		return nil, ErrNoRequest
	}
	c, err := s.cfg.Store.OAuthClientByID(ctx, a.ClientID)
	if err != nil || c.RevokedAt != nil {
		return nil, ErrNoRequest
	}
	return &Pending{RequestID: a.ID, ClientID: c.ID, ClientName: c.Name, ClientURI: c.ClientURI, RedirectURI: a.RedirectURI,
		AgentID: c.AgentID}, nil
}

// Approve authorizes the request's client as the outside agent agentID,
// by the admin by, and returns where the admin's browser goes next: the
// client's redirect with the code. The code is made here, in the
// consenting admin's own request, and only once: the request is taken
// (of two consents at once, one wins) and nothing else ever hands out a
// code for it (the provider's callback is closed; see New).
func (s *Server) Approve(ctx context.Context, r *http.Request, id string, by models.Actor, agentID string) (string, error) {
	p, err := s.Pending(ctx, id)
	if err != nil {
		return "", err
	}
	rec, err := s.cfg.Store.TakeOAuthRecord(ctx, kindRequest, id)
	if err != nil {
		return "", ErrNoRequest
	}
	var a authRequest
	if err := json.Unmarshal([]byte(rec.Data), &a); err != nil || a.Done() {
		return "", ErrNoRequest
	}
	putBack := func() { _ = s.cfg.Store.PutOAuthRecord(context.WithoutCancel(ctx), rec) }
	if err := s.cfg.Store.AuthorizeOAuthClient(ctx, p.ClientID, agentID, by); err != nil {
		putBack()
		return "", err
	}
	a.Subject, a.AuthTime = by.ID, s.cfg.Store.Now()
	if err := s.storage.put(ctx, kindRequest, a.ID, a.ClientID, &a, RequestLifetime); err != nil {
		return "", err
	}
	to, err := op.BuildAuthResponseCallbackURL(ctx, &a, s.provider)
	if err != nil {
		return "", err
	}
	return withIss(to, s.cfg.Issuer(r)), nil
}

// Deny refuses the request and returns the client's redirect with
// access_denied.
func (s *Server) Deny(ctx context.Context, r *http.Request, id string) (string, error) {
	var a authRequest
	if err := s.storage.get(ctx, kindRequest, id, &a); err != nil || a.Done() {
		return "", ErrNoRequest
	}
	if err := s.storage.DeleteAuthRequest(ctx, id); err != nil {
		return "", err
	}
	u, err := url.Parse(a.RedirectURI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("error", "access_denied")
	q.Set("error_description", "an administrator did not authorize this client")
	if a.State != "" {
		q.Set("state", a.State)
	}
	u.RawQuery = q.Encode()
	return withIss(u.String(), s.cfg.Issuer(r)), nil
}

// Access is what a valid access token stands for.
type Access struct {
	Client *models.OAuthClient
	// Subject is the staff id of the admin who consented.
	Subject string
}

// Verify checks an access token sent to /mcp: issued here, not expired,
// for this /mcp, of a client still authorized. The error is for the
// client's WWW-Authenticate.
func (s *Server) Verify(ctx context.Context, r *http.Request, token string) (*Access, error) {
	plain, err := s.provider.Crypto().Decrypt(token)
	if err != nil {
		return nil, errors.New("the token was not issued here")
	}
	id, subject, ok := strings.Cut(plain, ":")
	if !ok {
		return nil, errors.New("the token was not issued here")
	}
	var g grant
	if err := s.storage.get(ctx, kindAccess, id, &g); err != nil {
		return nil, errors.New("the token has expired or was revoked")
	}
	if g.Subject != subject || !slices.Contains(g.Audience, s.Resource(r)) {
		return nil, errors.New("the token is for another resource")
	}
	c, err := s.cfg.Store.OAuthClientByID(ctx, g.ClientID)
	if err != nil || c.RevokedAt != nil || c.AgentID == "" {
		return nil, errors.New("the client was revoked")
	}
	return &Access{Client: c, Subject: subject}, nil
}
