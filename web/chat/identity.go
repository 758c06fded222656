package chat

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/models/fault"
	"github.com/golang-jwt/jwt/v5"
)

// CustomerVerifier checks the customer tokens a shop's backend signs: HS256
// JWTs with sub (the customer id), name and exp.
type CustomerVerifier struct {
	secret   []byte
	previous [][]byte

	// MaxLifetime refuses tokens meant to live longer (from iat, or from
	// now when there is none, to exp); 0 takes DefaultTokenMaxLifetime.
	MaxLifetime time.Duration
	// Issuer and Audience, when set, must be the token's iss and be in its aud.
	Issuer, Audience string

	// demo is the /demo page's own secret: tokens it signs are accepted
	// only for the demo customers, never for a shop's real ones.
	demo    []byte
	demoIDs map[string]bool
}

// DefaultTokenMaxLifetime is the longest a customer token may be meant to
// live unless configured otherwise.
const DefaultTokenMaxLifetime = 24 * time.Hour

// AcceptDemo makes the verifier accept tokens signed with the demo page's
// secret, for the given customer ids only.
func (v *CustomerVerifier) AcceptDemo(secret string, ids ...string) {
	v.demo = []byte(secret)
	v.demoIDs = map[string]bool{}
	for _, id := range ids {
		v.demoIDs[id] = true
	}
}

// NewCustomerVerifier builds a verifier; with no secret every token is
// refused. Tokens signed with a previous secret are still accepted, so a
// shop can rotate its secret without signing every customer out: start with
// the new secret and the old one as previous, move the shop's backend to the
// new one, then drop the old.
func NewCustomerVerifier(secret string, previous ...string) *CustomerVerifier {
	v := &CustomerVerifier{secret: []byte(secret)}
	for _, p := range previous {
		if p != "" {
			v.previous = append(v.previous, []byte(p))
		}
	}
	return v
}

// Customer is who a valid token names.
type Customer struct {
	ID   string
	Name string
}

type customerClaims struct {
	Name string `json:"name"`
	jwt.RegisteredClaims
}

// Verify returns the customer a token names, or an unauthorized error that
// says what is wrong with it. A bad token is never treated as anonymous.
func (v *CustomerVerifier) Verify(token string) (Customer, error) {
	if len(v.secret) == 0 && len(v.demo) == 0 {
		return Customer{}, fault.Errorf(fault.Unauthorized, "this server accepts no customer tokens (no customer secret is configured)")
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithLeeway(30 * time.Second)}
	if v.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.Issuer))
	}
	if v.Audience != "" {
		opts = append(opts, jwt.WithAudience(v.Audience))
	}
	var claims customerClaims
	var err error
	signedByDemo := false
	secrets := append([][]byte{v.secret}, v.previous...)
	if len(v.demo) > 0 {
		secrets = append(secrets, v.demo)
	}
	for i, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		claims = customerClaims{}
		_, err = jwt.ParseWithClaims(strings.TrimSpace(token), &claims, func(*jwt.Token) (any, error) { return secret, nil }, opts...)
		if !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			signedByDemo = len(v.demo) > 0 && i == len(secrets)-1
			break // signed with this secret (valid or not otherwise)
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token has expired: sign the customer in again")
	case err != nil && !errors.Is(err, jwt.ErrTokenSignatureInvalid) && v.Issuer != "" && claims.Issuer != v.Issuer:
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token was issued by someone this server does not trust (iss)")
	case err != nil && !errors.Is(err, jwt.ErrTokenSignatureInvalid) && v.Audience != "" && !slices.Contains(claims.Audience, v.Audience):
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token is not meant for this server (aud)")
	case err != nil:
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token is not valid")
	case claims.Subject == "" || len(claims.Subject) > 64:
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token has no usable customer id (sub)")
	case signedByDemo && !v.demoIDs[claims.Subject]:
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token is not valid")
	}
	maxLife := v.MaxLifetime
	if maxLife <= 0 {
		maxLife = DefaultTokenMaxLifetime
	}
	from := time.Now()
	if claims.IssuedAt != nil {
		from = claims.IssuedAt.Time
	}
	if claims.ExpiresAt.Sub(from) > maxLife+30*time.Second {
		return Customer{}, fault.Errorf(fault.Unauthorized, "the customer token is meant to live longer than this server allows (%s): sign customer tokens for less time", maxLife)
	}
	name := claims.Name
	if len([]rune(name)) > 200 {
		name = string([]rune(name)[:200])
	}
	return Customer{ID: claims.Subject, Name: name}, nil
}

// SignCustomerToken signs a customer token, as a shop's backend would; the
// demo page and tests use it.
func SignCustomerToken(secret, customerID, name string, ttl time.Duration) (string, error) {
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, customerClaims{Name: name, RegisteredClaims: jwt.RegisteredClaims{
		Subject: customerID, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl))}})
	return t.SignedString([]byte(secret))
}
