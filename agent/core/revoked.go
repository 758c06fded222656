package core

import (
	"context"
	"time"
)

// Revoked is what a listener also implements when it holds something for
// an agent (requests held open for its key): told when the agent's key is
// revoked, here, on another instance or by the command line.
type Revoked interface{ AgentRevoked(agentID string) }

// AgentRevoked tells the listeners here and the other instances that an
// agent's key was revoked and which of its waiting actions were cancelled
// with it (accounts.Service.Revoked).
func (b *Bus) AgentRevoked(agentID string, cancelled []string) {
	for _, id := range cancelled {
		b.ActionChanged(id)
	}
	b.revokedHere(agentID)
	b.tell(notice{Agent: agentID})
}

func (b *Bus) revokedHere(agentID string) {
	tell(b, func(l Revoked) { l.AgentRevoked(agentID) })
}

// revocationsSince is the catch-up for revocations nothing told this
// instance of (the command line's `agent revoke`, a lost notice): every
// agent revoked since the last look (with a margin for clocks that
// differ between instances) is told again; telling twice ends nothing
// twice.
func (c *Core) revocationsSince(ctx context.Context, since time.Time) time.Time {
	now := c.Store.Now()
	ids, err := c.Store.AgentsRevokedSince(ctx, since.Add(-revocationMargin))
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("could not look for revoked agents", "err", err)
		}
		return since
	}
	for _, id := range ids {
		c.Bus.revokedHere(id)
	}
	return now
}

// revocationMargin is how far back each look for revocations reaches
// before the previous one.
const revocationMargin = 30 * time.Second
