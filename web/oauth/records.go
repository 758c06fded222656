package oauth

import (
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// authRequest is an authorization request on its way: asked by a client,
// waiting for an admin's consent (Subject empty), then done, then traded
// once for tokens. It is kept as JSON in models.OAuthRecord.
type authRequest struct {
	ID              string                   `json:"id"`
	ClientID        string                   `json:"client_id"`
	RedirectURI     string                   `json:"redirect_uri"`
	State           string                   `json:"state"`
	Nonce           string                   `json:"nonce"`
	Scopes          []string                 `json:"scopes"`
	ResponseType    oidc.ResponseType        `json:"response_type"`
	ResponseMode    oidc.ResponseMode        `json:"response_mode"`
	Challenge       string                   `json:"code_challenge"`
	ChallengeMethod oidc.CodeChallengeMethod `json:"code_challenge_method"`
	// Resource is the protected resource the token will be for (RFC 8707):
	// this server's /mcp.
	Resource string `json:"resource"`
	// Subject is the admin who consented; AuthTime when.
	Subject  string    `json:"subject"`
	AuthTime time.Time `json:"auth_time"`
}

func (a *authRequest) GetID() string                      { return a.ID }
func (a *authRequest) GetACR() string                     { return "" }
func (a *authRequest) GetAMR() []string                   { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string              { return []string{a.Resource} }
func (a *authRequest) GetAuthTime() time.Time             { return a.AuthTime }
func (a *authRequest) GetClientID() string                { return a.ClientID }
func (a *authRequest) GetNonce() string                   { return a.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.Scopes }
func (a *authRequest) GetState() string                   { return a.State }
func (a *authRequest) GetSubject() string                 { return a.Subject }
func (a *authRequest) Done() bool                         { return a.Subject != "" }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.Challenge, Method: a.ChallengeMethod}
}

// grant is what an access or a refresh token stands for: a client acting
// for the admin who consented, toward one resource.
type grant struct {
	// Family is the sign-in the grant descends from: the authorization
	// request its code was for.
	Family   string    `json:"family"`
	ClientID string    `json:"client_id"`
	Subject  string    `json:"subject"`
	Audience []string  `json:"audience"`
	Scopes   []string  `json:"scopes"`
	AuthTime time.Time `json:"auth_time"`
}

func (g *grant) GetAMR() []string                 { return []string{"pwd"} }
func (g *grant) GetAudience() []string            { return g.Audience }
func (g *grant) GetAuthTime() time.Time           { return g.AuthTime }
func (g *grant) GetClientID() string              { return g.ClientID }
func (g *grant) GetScopes() []string              { return g.Scopes }
func (g *grant) GetSubject() string               { return g.Subject }
func (g *grant) SetCurrentScopes(scopes []string) { g.Scopes = scopes }

// spent is a refresh token traded in: its grant, when, what it bought
// (the access token's id, the new refresh token's hash), and whether its
// grace was used.
type spent struct {
	Grant   grant     `json:"grant"`
	At      time.Time `json:"at"`
	Access  string    `json:"access"`
	Refresh string    `json:"refresh"`
	Graced  bool      `json:"graced"`
}

func (s *spent) inGrace(now time.Time) bool { return !s.Graced && now.Sub(s.At) < RefreshGrace }
