package chat

import (
	"context"
	"log/slog"
	"time"

	"github.com/countersign/countersign/models/storage"
)

// Tokens is how the shop signs its customers' tokens, as the operator set
// it (--customer-secret and its companions).
type Tokens struct {
	// Secret signs the shop's tokens, Previous the ones a rotation still
	// accepts ("": none).
	Secret, Previous string
	// MaxAge bounds a token's lifetime; Issuer and Audience, when set, must
	// be the token's.
	MaxAge           time.Duration
	Issuer, Audience string
	// DemoPage shows /demo even though Secret is set (it signs with a
	// secret of its own, for the demo customers only).
	DemoPage bool
}

// Settled is what the customers' door is built from once the shop's
// settings and the secrets kept in the database are read.
type Settled struct {
	Customers *CustomerVerifier
	// DemoSecret signs /demo's tokens ("": the page is off).
	DemoSecret string
	// GrantSeed keeps the chat frames' grants valid on every instance of
	// one database and across restarts.
	GrantSeed []byte
}

// Settle builds the verifier of the shop's tokens and the two secrets the
// door needs. /demo signs with a secret of its own, valid for the demo
// customers only, never as the shop; it is kept in the database so that
// every instance behind one load balancer accepts what another signed.
// With the shop's secret set the page is off unless DemoPage asks for it.
// Without the shop's secret the grants' seed is kept in the database too.
func (t Tokens) Settle(ctx context.Context, store *storage.Store, demo []DemoCustomer, log *slog.Logger) (Settled, error) {
	v := NewCustomerVerifier(t.Secret, t.Previous)
	v.MaxLifetime, v.Issuer, v.Audience = t.MaxAge, t.Issuer, t.Audience
	out := Settled{Customers: v, GrantSeed: []byte(t.Secret)}
	switch {
	case len(demo) > 0 && (t.Secret == "" || t.DemoPage):
		secret, err := store.Secret(ctx, "demo-page")
		if err != nil {
			return Settled{}, err
		}
		ids := make([]string, 0, len(demo))
		for _, c := range demo {
			ids = append(ids, c.ID)
		}
		v.AcceptDemo(secret, ids...)
		out.DemoSecret = secret
		if t.Secret == "" {
			log.Info("no customer secret given: only the demo page's customers can sign in to the chat")
		}
	case len(demo) > 0:
		log.Info("the demo page is off because a customer secret is set (--demo-page shows it)")
	}
	if len(out.GrantSeed) == 0 {
		seed, err := store.Secret(ctx, "chat-grants")
		if err != nil {
			return Settled{}, err
		}
		out.GrantSeed = []byte(seed)
	}
	return out, nil
}
