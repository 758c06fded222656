// Package backoffice is the staff's side: the queue and each action's
// page where people approve, edit or reject, runs, the audit log and its
// chain, receipts and evidence, the policy and its versions, insights,
// tools, staff and their changes, sign-in (passwords, SSO, passkeys,
// enrollment links) and the staff API. Handlers over the core, each route
// with the role it needs (routes.go).
package backoffice

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/countersign/countersign/web/oauth"
)

// Options is how the back office is set up.
type Options struct {
	Log *slog.Logger
	// PublicURL is the address people reach this server at (--public-url);
	// "": from each request.
	PublicURL string
	// SSO signs staff in with the company's OpenID Provider (nil: none).
	SSO *SSOConfig
	// NoPasswordSignIn turns password sign-in off: staff sign in through
	// SSO; the host's CLI stays for break-glass.
	NoPasswordSignIn bool
	// Upstreams says how the MCP servers of the tools file are doing, for
	// the tools page (nil: there are none).
	Upstreams func() []tools.UpstreamStatus
	// AuditSearchTimeout bounds an audit page whose filter searches text
	// in the arguments (a scan over the calls); 0: 15 s.
	AuditSearchTimeout time.Duration
}

// Office is the back office's handlers.
type Office struct {
	cfg Options
	// core is what the handlers serve: the gate, the run loop, the
	// accounts, the outbox, the policy versions, the store.
	core *core.Core
	// kit is what every door shares (web/doorkit): limits, streams, JSON.
	kit *doorkit.Kit
	// oauth is /mcp's OAuth door, whose consent is an admin's here.
	oauth *oauth.Door
	// oldPolicies are policy versions no longer in force, loaded to word
	// what held a call (heldUnder), by hash.
	oldPolicies sync.Map
	// changes is what the pages hear on the core's bus.
	changes *Changes
	// sso is the company's identity provider (nil: none).
	sso *sso
	// Sign-in attempts per client address, and per address and account.
	loginIP, loginAccount *doorkit.Limiter
	// insightSlots lets one insights read run at a time on this instance
	// (readInsights): a person's report never starves the gate.
	insightSlots chan struct{}
	// versions compares what live instances decide with (instances.go).
	inForce inForceCheck

	chainMu      sync.Mutex
	chainRunning bool
	chainAt      time.Time
	chainOK      bool
	chainText    string
	chainWanted  chan struct{} // asks the audit chain check job for a check
}

// New builds the back office over the core: it listens on the core's bus
// and adds its jobs (the live queue's rendering, the audit chain check) to
// the core's, so it comes before Core.Start.
func New(c *core.Core, kit *doorkit.Kit, od *oauth.Door, opts Options) *Office {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.AuditSearchTimeout == 0 {
		opts.AuditSearchTimeout = 15 * time.Second
	}
	s := &Office{cfg: opts, core: c, kit: kit, oauth: od, changes: newChanges(opts.Log),
		loginIP:      kit.Limiter(3*time.Second, 20, "login_ip"),      // 20 at once, then 20 a minute per address (an office shares one)
		loginAccount: kit.Limiter(12*time.Second, 5, "login_account"), // 5 at once, then 5 a minute per address and account
		insightSlots: make(chan struct{}, 1), chainWanted: make(chan struct{}, 1)}
	if opts.SSO != nil {
		if opts.SSO.GroupsClaim == "" {
			opts.SSO.GroupsClaim = "groups"
		}
		s.sso = &sso{cfg: opts.SSO}
	}
	c.Bus.Listen(s.changes)
	c.Job("live queue pages", func(ctx context.Context) { s.changes.queue.Run(ctx, s.renderQueueRows) })
	c.Job("audit chain check", s.checkChain)
	return s
}
