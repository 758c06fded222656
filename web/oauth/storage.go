package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
)

// How long what the authorization server issues lasts.
const (
	RequestLifetime = 10 * time.Minute
	AccessLifetime  = 15 * time.Minute
	RefreshLifetime = 30 * 24 * time.Hour
)

// Record kinds in models.OAuthRecord.
const (
	kindRequest = "request"
	kindCode    = "code"
	kindAccess  = "access"
	kindRefresh = "refresh"
	// kindSpent is a refresh token traded in, kept by its hash with what
	// it bought.
	kindSpent = "spent"
)

// RefreshGrace is how long a refresh token traded in may be traded in
// once more, when the answer to its use was lost on the way.
const RefreshGrace = 2 * time.Minute

// opStorage is op.Storage over Countersign's database.
type opStorage struct {
	store   *storage.Store
	key     *rsa.PrivateKey
	keyID   string
	consent func(requestID string) string
	// resource is the protected resource of a request (ctx; see Server).
	resource func(ctx context.Context) string
	// documents fetches clients' metadata documents (document.go).
	documents *http.Client
	// decrypt reads a code's request id (the provider's crypto).
	decrypt func(string) (string, error)
	log     *slog.Logger
}

var _ op.Storage = (*opStorage)(nil)

// signingKey is the RSA key ID tokens are signed with, shared by every
// instance through the database.
func signingKey(ctx context.Context, store *storage.Store) (*rsa.PrivateKey, string, error) {
	pemText, err := store.SecretMade(ctx, "oauth-signing-key", func() (string, error) {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return "", err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return "", err
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
	})
	if err != nil {
		return nil, "", err
	}
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, "", errors.New("the stored OAuth signing key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, "", err
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, "", errors.New("the stored OAuth signing key is not RSA")
	}
	der, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	sum := sha256.Sum256(der)
	return rk, hex.EncodeToString(sum[:8]), nil
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// hashed is how a refresh token is kept: never the token itself.
func hashed(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func (s *opStorage) put(ctx context.Context, kind, id, clientID string, v any, lifetime time.Duration) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	family := ""
	if g, ok := v.(*grant); ok {
		family = g.Family
	} else if sp, ok := v.(*spent); ok {
		family = sp.Grant.Family
	}
	return s.store.PutOAuthRecord(ctx, &models.OAuthRecord{Kind: kind, ID: id, ClientID: clientID, Data: string(data),
		ExpiresAt: s.store.Now().Add(lifetime), Family: family})
}

func (s *opStorage) get(ctx context.Context, kind, id string, v any) error {
	r, err := s.store.OAuthRecordByID(ctx, kind, id)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(r.Data), v)
}

// CreateAuthRequest keeps a client's request until an admin consents. It
// insists on PKCE with S256 (OAuth 2.1) and asks for a refresh token
// (offline_access) whatever the client asked, since MCP clients reconnect.
func (s *opStorage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	scopes := slices.DeleteFunc(slices.Clone(req.Scopes), func(s string) bool { return s != Scope && s != oidc.ScopeOfflineAccess })
	if !slices.Contains(scopes, Scope) {
		scopes = append(scopes, Scope)
	}
	if !slices.Contains(scopes, oidc.ScopeOfflineAccess) {
		scopes = append(scopes, oidc.ScopeOfflineAccess)
	}
	a := &authRequest{ID: models.NewID("authz"), ClientID: req.ClientID, RedirectURI: req.RedirectURI, State: req.State,
		Nonce: req.Nonce, Scopes: scopes, ResponseType: req.ResponseType, ResponseMode: req.ResponseMode,
		Challenge: req.CodeChallenge, ChallengeMethod: req.CodeChallengeMethod, Resource: s.resource(ctx)}
	return a, s.put(ctx, kindRequest, a.ID, a.ClientID, a, RequestLifetime)
}

func (s *opStorage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	var a authRequest
	if err := s.get(ctx, kindRequest, id, &a); err != nil {
		return nil, fmt.Errorf("no such authorization request: %w", err)
	}
	return &a, nil
}

// AuthRequestByCode is the request a code stands for; the code is used up.
// A code used again revokes the tokens it bought (OAuth 2.1 §4.1.3): its
// request id, which is the family of those tokens, is inside it.
func (s *opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.store.TakeOAuthRecord(ctx, kindCode, hashed(code))
	if err != nil {
		if id, derr := s.decrypt(code); derr == nil && id != "" {
			if n, _ := s.store.RevokeOAuthFamily(ctx, id); n > 0 {
				s.log.Warn("an authorization code was used twice: the tokens it bought are revoked", "family", id, "tokens", n)
			}
		}
		return nil, fmt.Errorf("the code is not valid (used, expired or never issued): %w", err)
	}
	return s.AuthRequestByID(ctx, r.Data)
}

func (s *opStorage) SaveAuthCode(ctx context.Context, id, code string) error {
	a, err := s.AuthRequestByID(ctx, id)
	if err != nil {
		return err
	}
	return s.store.PutOAuthRecord(ctx, &models.OAuthRecord{Kind: kindCode, ID: hashed(code), ClientID: a.GetClientID(), Data: id,
		ExpiresAt: s.store.Now().Add(RequestLifetime)})
}

func (s *opStorage) DeleteAuthRequest(ctx context.Context, id string) error {
	return s.store.DeleteOAuthRecord(ctx, kindRequest, id)
}

// grantOf is the grant a token request stands for, from a client that is
// authorized and not revoked.
func (s *opStorage) grantOf(ctx context.Context, req op.TokenRequest) (*grant, error) {
	g := &grant{Subject: req.GetSubject(), Audience: req.GetAudience(), Scopes: req.GetScopes(), AuthTime: time.Now()}
	switch r := req.(type) {
	case *authRequest:
		g.ClientID, g.AuthTime, g.Family = r.ClientID, r.AuthTime, r.ID
	case *grant:
		g.ClientID, g.AuthTime, g.Family = r.ClientID, r.AuthTime, r.Family
	default:
		return nil, oidc.ErrUnsupportedGrantType()
	}
	c, err := s.store.OAuthClientByID(ctx, g.ClientID)
	if err != nil || c.RevokedAt != nil || c.AgentID == "" {
		return nil, oidc.ErrInvalidGrant().WithDescription("this client is not authorized (or was revoked)")
	}
	return g, nil
}

func (s *opStorage) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	g, err := s.grantOf(ctx, req)
	if err != nil {
		return "", time.Time{}, err
	}
	id := randomToken()
	return id, s.store.Now().Add(AccessLifetime), s.put(ctx, kindAccess, id, g.ClientID, g, AccessLifetime)
}

// CreateAccessAndRefreshTokens issues both; a refresh token rotates: the
// one traded in is used up (of two trading it at once, one wins) and kept
// as spent, with what it bought, for reuse to be recognized
// (TokenRequestByRefreshToken).
func (s *opStorage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	var graced *spent
	if current != "" {
		if _, err := s.store.TakeOAuthRecord(ctx, kindRefresh, hashed(current)); err != nil {
			// Not live: a spent token within its grace, taken once.
			rec, terr := s.store.TakeOAuthRecord(ctx, kindSpent, hashed(current))
			var sp spent
			if terr != nil || json.Unmarshal([]byte(rec.Data), &sp) != nil || !sp.inGrace(s.store.Now()) {
				return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the refresh token was already used or has expired")
			}
			// What the first use bought never reached the client: it goes.
			_ = s.store.DeleteOAuthRecord(ctx, kindAccess, sp.Access)
			_ = s.store.DeleteOAuthRecord(ctx, kindRefresh, sp.Refresh)
			_ = s.store.DeleteOAuthRecord(ctx, kindSpent, sp.Refresh)
			graced = &sp
		}
	}
	g, err := s.grantOf(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	access, expires, err := s.CreateAccessToken(ctx, req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	refresh := randomToken()
	if err := s.put(ctx, kindRefresh, hashed(refresh), g.ClientID, g, RefreshLifetime); err != nil {
		return "", "", time.Time{}, err
	}
	if current != "" {
		sp := &spent{Grant: *g, At: s.store.Now(), Access: access, Refresh: hashed(refresh), Graced: graced != nil}
		if graced != nil {
			sp.At = graced.At
		}
		if err := s.put(ctx, kindSpent, hashed(current), g.ClientID, sp, RefreshLifetime); err != nil {
			return "", "", time.Time{}, err
		}
	}
	return access, refresh, expires, nil
}

// TokenRequestByRefreshToken is the grant a live refresh token stands for.
// A spent one is answered once more within RefreshGrace, in case the
// answer to its use never reached the client; past that, or the second
// time, it is a token used twice, which revokes its whole family (OAuth
// 2.1 §4.3.1): whoever holds the newer tokens, the client or a thief,
// must sign in again.
func (s *opStorage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	var g grant
	if err := s.get(ctx, kindRefresh, hashed(token), &g); err == nil {
		return &g, nil
	}
	var sp spent
	if err := s.get(ctx, kindSpent, hashed(token), &sp); err != nil {
		return nil, op.ErrInvalidRefreshToken
	}
	if sp.inGrace(s.store.Now()) {
		return &sp.Grant, nil
	}
	if n, err := s.store.RevokeOAuthFamily(ctx, sp.Grant.Family); err == nil {
		s.log.Warn("a refresh token was used twice: every token of its sign-in is revoked", "client_id", sp.Grant.ClientID, "records", n)
	}
	return nil, op.ErrInvalidRefreshToken
}

func (s *opStorage) TerminateSession(context.Context, string, string) error { return nil }

func (s *opStorage) RevokeToken(ctx context.Context, tokenOrID, _ string, clientID string) *oidc.Error {
	for _, k := range []struct{ kind, id string }{{kindAccess, tokenOrID}, {kindRefresh, hashed(tokenOrID)}} {
		r, err := s.store.OAuthRecordByID(ctx, k.kind, k.id)
		if err != nil {
			continue
		}
		if r.ClientID != clientID {
			return oidc.ErrInvalidClient().WithDescription("the token is another client's")
		}
		if err := s.store.DeleteOAuthRecord(ctx, k.kind, k.id); err != nil {
			return oidc.ErrServerError()
		}
	}
	return nil
}

func (s *opStorage) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	var g grant
	if err := s.get(ctx, kindRefresh, hashed(token), &g); err != nil || g.ClientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return g.Subject, token, nil
}

type signing struct {
	key *rsa.PrivateKey
	id  string
}

func (k signing) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signing) Key() any                                    { return k.key }
func (k signing) ID() string                                  { return k.id }

type public struct {
	key *rsa.PublicKey
	id  string
}

func (k public) ID() string                         { return k.id }
func (k public) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k public) Use() string                        { return "sig" }
func (k public) Key() any                           { return k.key }

func (s *opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	return signing{s.key, s.keyID}, nil
}
func (s *opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *opStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{public{&s.key.PublicKey, s.keyID}}, nil
}

// GetClientByClientID is a registered client not revoked (authorized or
// not yet: the consent page is where it gets authorized).
func (s *opStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if isDocumentID(id) {
		c, err := s.documentClient(ctx, id)
		if err != nil {
			return nil, oidc.ErrInvalidClient().WithDescription("%s", err.Error())
		}
		if c.RevokedAt != nil {
			return nil, oidc.ErrInvalidClient().WithDescription("this client was revoked")
		}
		return newClient(c, s.consent), nil
	}
	c, err := s.store.OAuthClientByID(ctx, id)
	if err != nil || c.RevokedAt != nil {
		return nil, oidc.ErrInvalidClient().WithDescription("no such client, or it was revoked")
	}
	return newClient(c, s.consent), nil
}

func (s *opStorage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return errors.New("clients here are public: they use PKCE, not a secret")
}

func (s *opStorage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *opStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	info.Subject = subject
	return nil
}

func (s *opStorage) SetIntrospectionFromToken(ctx context.Context, in *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	var g grant
	if err := s.get(ctx, kindAccess, tokenID, &g); err != nil {
		return err
	}
	in.Active, in.Subject, in.ClientID, in.Audience, in.Scope = true, g.Subject, g.ClientID, g.Audience, g.Scopes
	return nil
}

func (s *opStorage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT client authentication is not offered")
}

func (s *opStorage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("the JWT profile grant is not offered")
}

func (s *opStorage) Health(ctx context.Context) error {
	_, _, err := s.store.Schema(ctx)
	return err
}
