// Package oauth is Countersign's authorization server for /mcp, as the MCP
// authorization specification has it: OAuth 2.1 with the authorization
// code grant and PKCE (S256 only), public clients that register themselves
// (RFC 7591), resource indicators binding every token to this server's
// /mcp (RFC 8707), short opaque access tokens and rotating refresh tokens,
// and the issuer in the authorization response (RFC 9207). The protocol
// itself is zitadel/oidc's OpenID provider (op); this package is its
// storage over Countersign's database, the registration endpoint, the
// metadata documents (RFC 8414, RFC 9728) and the consent, which the back
// office asks an admin for (web).
package oauth

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/countersign/countersign/models/storage"
)

// Scope is the one scope tokens carry: calling /mcp.
const Scope = "mcp"

// Paths of the authorization server.
const (
	PathAuthorize         = "/oauth/authorize"
	PathCallback          = "/oauth/authorize/callback"
	PathToken             = "/oauth/token"
	PathRegister          = "/oauth/register"
	PathRevoke            = "/oauth/revoke"
	PathIntrospect        = "/oauth/introspect"
	PathKeys              = "/oauth/keys"
	PathUserinfo          = "/oauth/userinfo"
	PathEndSession        = "/oauth/end_session"
	PathServerMetadata    = "/.well-known/oauth-authorization-server"
	PathOpenIDMetadata    = "/.well-known/openid-configuration"
	PathResourceMetadata  = "/.well-known/oauth-protected-resource"
	ResourcePath          = "/mcp"
	resourceMetadataOfMCP = PathResourceMetadata + ResourcePath
)

// Config is what the server is built from.
type Config struct {
	Store *storage.Store
	// Issuer is this server's base URL as the client reached it
	// (https://countersign.example.com), from --public-url or the request.
	Issuer func(r *http.Request) string
	// Consent is the back office's consent page for a request id.
	Consent func(requestID string) string
	// Documents fetches clients' metadata documents (nil: DocumentClient,
	// public addresses only; tests give one that trusts their server).
	Documents *http.Client
	Log       *slog.Logger
}

// Server is the authorization server.
type Server struct {
	cfg      Config
	storage  *opStorage
	provider *op.Provider
	handler  http.Handler
}

type resourceKey struct{}

// New builds the server; its keys are the database's, shared by every
// instance.
func New(ctx context.Context, cfg Config) (*Server, error) {
	key, keyID, err := signingKey(ctx, cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("the OAuth signing key: %w", err)
	}
	secret, err := cfg.Store.Secret(ctx, "oauth-token-key")
	if err != nil {
		return nil, err
	}
	var crypto [32]byte
	if b, err := hex.DecodeString(secret); err != nil || len(b) < 32 {
		return nil, errors.New("the stored OAuth token key is not 32 bytes of hex")
	} else {
		copy(crypto[:], b)
	}
	s := &Server{cfg: cfg}
	s.storage = &opStorage{store: cfg.Store, key: key, keyID: keyID, consent: cfg.Consent,
		resource: func(ctx context.Context) string { r, _ := ctx.Value(resourceKey{}).(string); return r }, documents: cfg.Documents}
	if s.storage.documents == nil {
		s.storage.documents = DocumentClient()
	}
	s.storage.log = cfg.Log
	if s.storage.log == nil {
		s.storage.log = slog.New(slog.DiscardHandler)
	}
	opts := []op.Option{op.WithCustomEndpoints(op.NewEndpoint(PathAuthorize), op.NewEndpoint(PathToken), op.NewEndpoint(PathUserinfo),
		op.NewEndpoint(PathRevoke), op.NewEndpoint(PathEndSession), op.NewEndpoint(PathKeys)),
		op.WithCustomIntrospectionEndpoint(op.NewEndpoint(PathIntrospect))}

	s.provider, err = op.NewProvider(&op.Config{CryptoKey: crypto, CodeMethodS256: true, GrantTypeRefreshToken: true,
		SupportedScopes: []string{Scope, oidc.ScopeOfflineAccess}}, s.storage,
		func(bool) (op.IssuerFromRequest, error) { return cfg.Issuer, nil }, opts...)
	if err != nil {
		return nil, fmt.Errorf("the OAuth provider: %w", err)
	}
	s.storage.decrypt = s.provider.Crypto().Decrypt
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathServerMetadata, s.serverMetadata)
	mux.HandleFunc("GET "+PathResourceMetadata, s.resourceMetadata)
	mux.HandleFunc("GET "+resourceMetadataOfMCP, s.resourceMetadata)
	mux.HandleFunc("POST "+PathRegister, s.register)
	mux.Handle(PathAuthorize, s.authorize(s.provider))
	// The provider's callback would hand a code for a consented request to
	// whoever asks, as often as asked: the code goes from the consent alone.
	mux.HandleFunc(PathCallback, func(w http.ResponseWriter, _ *http.Request) {
		writeOAuthError(w, http.StatusNotFound, "invalid_request", "codes are sent to the client's redirect by the administrator's consent, once")
	})
	mux.Handle("/oauth/", s.provider)
	// One metadata document, saying only what the token endpoint grants
	// (the provider's OpenID one offered more).
	mux.HandleFunc("GET "+PathOpenIDMetadata, s.serverMetadata)
	s.handler = mux
	return s, nil
}

// ServeHTTP serves the authorization server's paths (Paths).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Resource is the protected resource tokens are bound to: this server's /mcp.
func (s *Server) Resource(r *http.Request) string { return s.cfg.Issuer(r) + ResourcePath }

// Challenge is the WWW-Authenticate header of a 401 from /mcp: where a
// client finds how to get a token (RFC 9728).
func (s *Server) Challenge(r *http.Request, problem string) string {
	h := `Bearer resource_metadata="` + s.cfg.Issuer(r) + resourceMetadataOfMCP + `", scope="` + Scope + `"`
	if problem != "" {
		h += `, error="invalid_token", error_description="` + strings.ReplaceAll(problem, `"`, `'`) + `"`
	}
	return h
}

// authorize checks the resource indicator before the provider sees the
// request: a token is only ever for this server's /mcp (none named: that
// one). Another is refused with invalid_target, to the client when its
// redirect is known.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, "the request cannot be read", http.StatusBadRequest)
			return
		}
		want := s.Resource(r)
		for _, got := range r.Form["resource"] {
			if strings.TrimRight(got, "/") != want {
				writeOAuthError(w, http.StatusBadRequest, "invalid_target", "this server issues tokens only for "+want)
				return
			}
		}
		if m := r.Form.Get("code_challenge_method"); r.Form.Get("code_challenge") == "" || m != "S256" {
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", "PKCE with code_challenge_method=S256 is required")
			return
		}
		// Each request is stored until it expires: nothing in it is longer
		// than a client needs.
		for name, most := range maxParam {
			for _, v := range r.Form[name] {
				if len(v) > most {
					writeOAuthError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("%s is over %d characters", name, most))
					return
				}
			}
		}
		if len(r.Form) > 20 || len(r.URL.RawQuery) > 8<<10 {
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", "the authorization request is over 8 KiB or has over 20 parameters")
			return
		}
		// An error goes back to the client's redirect only for a client an
		// admin authorized: anyone may register a redirect, and a server
		// that sends browsers to any address it was given is an open
		// redirector. For the others the error is shown here.
		if c, err := s.cfg.Store.OAuthClientByID(r.Context(), r.Form.Get("client_id")); err != nil || c.AgentID == "" {
			w = &noErrorRedirects{ResponseWriter: w, consent: s.cfg.Consent("")}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), resourceKey{}, want)))
	})
}

// noErrorRedirects answers an authorization error here instead of
// redirecting to the client (see authorize).
type noErrorRedirects struct {
	http.ResponseWriter
	consent  string
	replaced bool
}

func (w *noErrorRedirects) WriteHeader(code int) {
	loc := w.Header().Get("Location")
	if (code == http.StatusFound || code == http.StatusSeeOther) && !strings.HasPrefix(loc, w.consent) {
		u, _ := url.Parse(loc)
		q := url.Values{}
		if u != nil {
			q = u.Query()
		}
		w.Header().Del("Location")
		w.replaced = true
		writeOAuthError(w.ResponseWriter, http.StatusBadRequest, cmp.Or(q.Get("error"), "invalid_request"),
			cmp.Or(q.Get("error_description"), "the authorization request was refused"))
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *noErrorRedirects) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil // the redirect's own body
	}
	return w.ResponseWriter.Write(b)
}

// maxParam bounds an authorization request's parameters: an S256
// challenge is 43 characters; a state of 1,024 holds any client's.
var maxParam = map[string]int{"state": 1024, "nonce": 256, "code_challenge": 128, "redirect_uri": 2000, "client_id": 500,
	"scope": 200, "resource": 500, "response_type": 32, "response_mode": 32, "code_challenge_method": 16, "prompt": 64}

// withIss adds iss to an authorization response's redirect (RFC 9207),
// so that a client talking to several servers knows which one answered.
func withIss(to, iss string) string {
	u, err := url.Parse(to)
	if err != nil || to == "" {
		return to
	}
	q := u.Query()
	if q.Get("iss") == "" {
		q.Set("iss", iss)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func writeOAuthError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// serverMetadata is RFC 8414's document.
func (s *Server) serverMetadata(w http.ResponseWriter, r *http.Request) {
	iss := s.cfg.Issuer(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + PathAuthorize,
		"token_endpoint":                                 iss + PathToken,
		"registration_endpoint":                          iss + PathRegister,
		"revocation_endpoint":                            iss + PathRevoke,
		"introspection_endpoint":                         iss + PathIntrospect,
		"jwks_uri":                                       iss + PathKeys,
		"scopes_supported":                               []string{Scope, oidc.ScopeOfflineAccess},
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          true,
	})
}

// resourceMetadata is RFC 9728's document for /mcp.
func (s *Server) resourceMetadata(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.Resource(r),
		"authorization_servers":    []string{s.cfg.Issuer(r)},
		"scopes_supported":         []string{Scope},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Countersign MCP gateway",
	})
}
