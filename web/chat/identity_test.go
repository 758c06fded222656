package chat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/web/chat"
)

// During a rotation tokens signed with the previous secret still verify;
// any other secret, an expired token or no secret at all do not.
func TestCustomerSecretRotation(t *testing.T) {
	const newSecret, oldSecret = "new-secret-new-secret-new-secret-1", "old-secret-old-secret-old-secret-1"
	v := chat.NewCustomerVerifier(newSecret, oldSecret)
	for _, c := range []struct {
		name, secret string
		ttl          time.Duration
		want         string // customer id, or a piece of the error
	}{
		{"new secret", newSecret, time.Hour, "cus_alice"},
		{"previous secret", oldSecret, time.Hour, "cus_alice"},
		{"previous secret, expired", oldSecret, -time.Hour, "has expired"},
		{"unknown secret", "someone-else-someone-else-someone", time.Hour, "not valid"},
	} {
		got, err := v.Verify(token(t, c.secret, "cus_alice", "Alice", c.ttl))
		switch {
		case err == nil && got.ID != c.want:
			t.Errorf("%s: customer %q, want %q", c.name, got.ID, c.want)
		case err != nil && !strings.Contains(fault.Message(err), c.want):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Once the old secret is dropped, its tokens stop working.
	if _, err := chat.NewCustomerVerifier(newSecret).Verify(token(t, oldSecret, "cus_alice", "Alice", time.Hour)); err == nil {
		t.Error("a token of the dropped secret still verifies")
	}
}

// The demo page's secret signs only the demo customers; tokens may not be
// meant to live longer than allowed; iss and aud are checked when set.
func TestCustomerTokenLimits(t *testing.T) {
	const shop, demo = "shop-secret-shop-secret-shop-secret", "demo-secret-demo-secret-demo-secret"
	v := chat.NewCustomerVerifier(shop)
	v.AcceptDemo(demo, "cus_alice")
	if c, err := v.Verify(token(t, demo, "cus_alice", "Alice", time.Hour)); err != nil || c.ID != "cus_alice" {
		t.Fatalf("a demo customer's demo token: %v %v", c, err)
	}
	if _, err := v.Verify(token(t, demo, "cus_real", "Real", time.Hour)); err == nil {
		t.Fatal("the demo secret signed in a customer who is not a demo customer")
	}
	if _, err := v.Verify(token(t, shop, "cus_real", "Real", 30*24*time.Hour)); err == nil || !strings.Contains(fault.Message(err), "longer than this server allows") {
		t.Fatalf("a 30-day token: %v", err)
	}
	v.MaxLifetime = 40 * 24 * time.Hour
	if _, err := v.Verify(token(t, shop, "cus_real", "Real", 30*24*time.Hour)); err != nil {
		t.Fatalf("a 30-day token with a 40-day limit: %v", err)
	}
	v.Issuer, v.Audience = "https://shop.example", "countersign"
	if _, err := v.Verify(token(t, shop, "cus_real", "Real", time.Hour)); err == nil || !strings.Contains(fault.Message(err), "(iss)") {
		t.Fatalf("a token without iss: %v", err)
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "cus_real", "iss": "https://shop.example", "aud": "countersign",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(shop))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("a token with the right iss and aud: %v", err)
	}
	tok, _ = jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "cus_real", "iss": "https://shop.example", "aud": "someone-else",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(shop))
	if _, err := v.Verify(tok); err == nil || !strings.Contains(fault.Message(err), "(aud)") {
		t.Fatalf("a token for another audience: %v", err)
	}
}

func token(t *testing.T, sec, id, name string, ttl time.Duration) string {
	t.Helper()
	tok, err := chat.SignCustomerToken(sec, id, name, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
