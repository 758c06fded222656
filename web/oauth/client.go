package oauth

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/countersign/countersign/models"
)

// client is a registered MCP client as the authorization server sees it: a
// public client (no secret; PKCE instead) using the authorization code and
// refresh token grants, whose login is Countersign's consent page.
type client struct {
	rec      *models.OAuthClient
	redirect []string
	consent  func(requestID string) string
}

func newClient(rec *models.OAuthClient, consent func(string) string) *client {
	c := &client{rec: rec, consent: consent}
	_ = json.Unmarshal([]byte(rec.RedirectURIs), &c.redirect)
	return c
}

func (c *client) GetID() string                    { return c.rec.ID }
func (c *client) RedirectURIs() []string           { return c.redirect }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) AuthMethod() oidc.AuthMethod      { return oidc.AuthMethodNone }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *client) LoginURL(id string) string { return c.consent(id) }

// AccessTokenType is opaque: a token names a record in the database, so a
// revoked client's tokens stop at once, on every instance.
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return 5 * time.Minute }
func (c *client) DevMode() bool                       { return false }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool     { return scope == Scope }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }

// ApplicationType is native when every redirect is the client's own
// machine (loopback, or an app's own scheme), which lets a loopback
// redirect be plain http as RFC 8252 has it; web otherwise (https only).
func (c *client) ApplicationType() op.ApplicationType {
	for _, r := range c.redirect {
		u, err := url.Parse(r)
		if err != nil {
			return op.ApplicationTypeWeb
		}
		if u.Scheme == "https" || (u.Scheme == "http" && !loopback(u.Hostname())) {
			return op.ApplicationTypeWeb
		}
	}
	return op.ApplicationTypeNative
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}
