package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/web"
)

// During a rotation tokens signed with the previous secret still verify;
// any other secret, an expired token or no secret at all do not.
func TestCustomerSecretRotation(t *testing.T) {
	const newSecret, oldSecret = "new-secret-new-secret-new-secret-1", "old-secret-old-secret-old-secret-1"
	v := web.NewCustomerVerifier(newSecret, oldSecret)
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
		case err != nil && !strings.Contains(agent.ErrorMessage(err), c.want):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Once the old secret is dropped, its tokens stop working.
	if _, err := web.NewCustomerVerifier(newSecret).Verify(token(t, oldSecret, "cus_alice", "Alice", time.Hour)); err == nil {
		t.Error("a token of the dropped secret still verifies")
	}
}
