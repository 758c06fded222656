package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/agent"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/policy"
)

// SweepEvery is how often the sweep runs: overdue actions expire, and what
// a lost notice between instances missed is caught up.
const SweepEvery = 5 * time.Second

// FollowEvery is how often the derived data (the insights' counts by hour,
// the audit search's index) is brought up to date with the audit log
// (storage.Store.Follow): how far behind the insights may be.
const FollowEvery = time.Second

// follow keeps the derived data up to date, a batch after another until
// it has caught up, then once a tick.
func (c *Core) follow(ctx context.Context) {
	agent.Every(ctx, FollowEvery, func(ctx context.Context) {
		for ctx.Err() == nil {
			more, err := c.Store.Follow(ctx)
			if err != nil && ctx.Err() == nil {
				c.log.Error("following the audit log failed", "err", err)
			}
			if err != nil || !more {
				return
			}
		}
	})
}

// sweep expires overdue actions and polls for what the bus may have
// missed: the tools' pins another instance's admin accepted, the policy
// version in force (also changed by the command line's `policy`), the
// agents revoked by the command line, and, while the other instances are
// not heard, everything the pages show.
func (c *Core) sweep(ctx context.Context) {
	revoked := c.Store.Now()
	agent.Every(ctx, SweepEvery, func(ctx context.Context) {
		c.sweepOnce(ctx)
		revoked = c.revocationsSince(ctx, revoked)
	})
}

// sweepOnce is one round of the sweep.
func (c *Core) sweepOnce(ctx context.Context) {
	if c.Bus.down.Load() {
		c.Bus.catchUp()
	} else {
		c.Gate.Repin()
		c.resync()
	}
	if n, err := c.Gate.ExpireOverdueActions(ctx); err != nil && ctx.Err() == nil {
		c.log.Error("expiry sweep failed", "err", err)
	} else if n > 0 {
		c.log.Info("expired overdue actions", "count", n)
	}
	c.tellHostAccounts(ctx)
}

// tellHostAccounts tells every admin of the accounts made on the host
// (countersign user add) since the last sweep: nobody countersigned them.
func (c *Core) tellHostAccounts(ctx context.Context) {
	n, err := c.Store.TellHostAccounts(ctx, c.Outbox.TellHostAccount)
	if err != nil && ctx.Err() == nil {
		c.log.Error("telling admins of accounts made on the host failed", "err", err)
	} else if n > 0 {
		c.Outbox.Kick()
		c.log.Warn("accounts were made on the host; every admin is told", "count", n)
	}
}

// resync puts the policy version in force in the database in force here.
func (c *Core) resync() {
	if err := c.Versions.Sync(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		c.log.Error("the policy version in force is not in force here", "err", err)
	}
}

// checkpoints writes a signed checkpoint of the audit chain every
// CheckpointEvery (when the chain has grown).
func (c *Core) checkpoints(ctx context.Context) {
	every := c.cfg.CheckpointEvery
	if every <= 0 {
		every = time.Hour
	}
	agent.Every(ctx, every, c.checkpoint)
}

// checkpoint writes one, when there is a key.
func (c *Core) checkpoint(ctx context.Context) {
	if c.cfg.AuditKey == nil {
		return
	}
	file, cp, err := audit.Take(ctx, c.Store, c.cfg.AuditKey, c.cfg.Checkpoints, time.Now())
	switch {
	case err != nil:
		c.log.Error("audit checkpoint not written", "err", err)
	case file != "":
		c.log.Info("audit checkpoint written", "file", file, "names", cp.What())
	}
}

// recordInForce records the policy and tools this instance decides with
// (instances.go's comparison across instances), unless the policy did not
// load: its instances row says why already (gate.FailClosed).
func (c *Core) recordInForce(ctx context.Context) error {
	if _, notLoaded := c.Gate.Policy().(*policy.NotLoaded); notLoaded {
		return nil
	}
	if err := c.Store.RecordInForce(ctx, Hostname(), c.Gate.Policy().Version(), c.Gate.ToolsVersion(), "start"); err != nil {
		return fmt.Errorf("record the versions in force: %w", err)
	}
	return nil
}
