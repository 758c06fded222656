package oauth

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/countersign/countersign/models"
)

// registration is what RFC 7591 lets a client send; what Countersign does
// not offer (secrets, implicit grants, other auth methods) is refused, and
// what is not known is ignored, as the RFC has it.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	Scope                   string   `json:"scope"`
}

// register is dynamic client registration (RFC 7591). Anyone may
// register: a client gets no token until an admin authorizes it on the
// consent page, which shows its name and its redirect.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var reg registration
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<10))
	if err != nil || json.Unmarshal(body, &reg) != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "send the client's metadata as a JSON object (at most 16 KiB)")
		return
	}
	if problem := reg.check(); problem != "" {
		writeOAuthError(w, http.StatusBadRequest, problem[:strings.IndexByte(problem, ':')], problem[strings.IndexByte(problem, ':')+2:])
		return
	}
	uris, _ := json.Marshal(reg.RedirectURIs)
	c := &models.OAuthClient{ID: models.NewID("csc"), Name: reg.ClientName, RedirectURIs: string(uris), ClientURI: reg.ClientURI}
	if err := s.cfg.Store.RegisterOAuthClient(r.Context(), c); err != nil {
		s.cfg.Log.Error("could not register an OAuth client", "err", err)
		writeOAuthError(w, http.StatusInternalServerError, "server_error", "the client could not be registered; try again")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        c.CreatedAt.Unix(),
		"client_name":                c.Name,
		"redirect_uris":              reg.RedirectURIs,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
		"scope":                      Scope,
	})
}

// check says what is wrong with a registration ("code: words"), "" when
// nothing is.
func (reg *registration) check() string {
	reg.ClientName = strings.TrimSpace(reg.ClientName)
	if reg.ClientName == "" {
		reg.ClientName = "an unnamed MCP client"
	}
	if len([]rune(reg.ClientName)) > 100 || strings.ContainsFunc(reg.ClientName, misleading) {
		return "invalid_client_metadata: client_name is at most 100 characters, without control or formatting characters (such as right-to-left overrides)"
	}
	if len(reg.RedirectURIs) == 0 || len(reg.RedirectURIs) > 10 {
		return "invalid_redirect_uri: give between 1 and 10 redirect_uris"
	}
	for _, raw := range reg.RedirectURIs {
		if problem := checkRedirect(raw); problem != "" {
			return "invalid_redirect_uri: " + problem
		}
	}
	if reg.ClientURI != "" {
		if u, err := url.Parse(reg.ClientURI); err != nil || (u.Scheme != "https" && u.Scheme != "http") || len(reg.ClientURI) > 500 {
			return "invalid_client_metadata: client_uri must be an http(s) URL of at most 500 characters"
		}
	}
	if m := reg.TokenEndpointAuthMethod; m != "" && m != "none" {
		return "invalid_client_metadata: clients here are public (token_endpoint_auth_method none) and prove themselves with PKCE"
	}
	for _, g := range reg.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return "invalid_client_metadata: the grant types offered are authorization_code and refresh_token"
		}
	}
	for _, t := range reg.ResponseTypes {
		if t != "code" {
			return "invalid_client_metadata: the response type offered is code"
		}
	}
	return ""
}

// checkRedirect allows what OAuth 2.1 does: https anywhere, http only to
// the client's own machine (loopback), or an app's private scheme; never a
// fragment.
// misleading is a character that would make a name read otherwise than it
// is: controls, and formatting characters (bidirectional overrides and
// isolates, zero-width joiners and spaces).
func misleading(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

func checkRedirect(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || len(raw) > 500 {
		return raw + " is not an absolute URL of at most 500 characters"
	}
	if u.Fragment != "" {
		return raw + " has a fragment"
	}
	if u.User != nil {
		return raw + " has a user name in it (what comes before @ is not the host an admin would take it for)"
	}
	switch {
	case u.Scheme == "https" && u.Host != "":
	case u.Scheme == "http" && loopback(u.Hostname()):
	case u.Scheme != "http" && u.Scheme != "https" && strings.Contains(u.Scheme, "."):
		// A private-use scheme (reverse domain name, RFC 8252 7.1).
	default:
		return raw + ": use https, http on localhost, or an app's own reverse-domain scheme"
	}
	return ""
}
