package web

import (
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign/agent"
)

// CustomerVerifier checks the customer tokens a shop's backend signs: HS256
// JWTs with sub (the customer id), name and exp.
type CustomerVerifier struct {
	secret   []byte
	previous [][]byte
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
	if len(v.secret) == 0 {
		return Customer{}, agent.Errorf(agent.CodeUnauthorized, "this server accepts no customer tokens (no customer secret is configured)")
	}
	var claims customerClaims
	var err error
	for _, secret := range append([][]byte{v.secret}, v.previous...) {
		claims = customerClaims{}
		_, err = jwt.ParseWithClaims(strings.TrimSpace(token), &claims, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second))
		if !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			break // signed with this secret (valid or not otherwise)
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Customer{}, agent.Errorf(agent.CodeUnauthorized, "the customer token has expired: sign the customer in again")
	case err != nil:
		return Customer{}, agent.Errorf(agent.CodeUnauthorized, "the customer token is not valid")
	case claims.Subject == "" || len(claims.Subject) > 64:
		return Customer{}, agent.Errorf(agent.CodeUnauthorized, "the customer token has no usable customer id (sub)")
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
