// Package core is Countersign's core as one process holds it: the gate and
// the run loop over one store, the accounts, the outbox, and the
// background jobs that keep them going (recovery, resuming runs, the
// outbox's deliveries, the heartbeat on PostgreSQL). The command builds
// it, hands its parts to the web server and starts its jobs; Close stops
// them in order.
package core

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent"

	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/agent/versions"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// Config is what the core is built from: the store, the tools, the policy
// and the model, and who is told of changes. Store, Tools and Policy are
// needed; a nil Model is for a gate used without runs.
type Config struct {
	Store *storage.Store
	Tools *tools.Registry
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Policy       policy.Policy
	Model        llm.Model
	Business     gate.BusinessFacts // nil: no business facts
	Log          *slog.Logger
	// ExecutionWait is how long an approval waits for its call (0: 10 s).
	ExecutionWait time.Duration
	// IntentWindow is how long after a person decided a call the same
	// intent asked again is answered with it (gate.Config.IntentWindow).
	IntentWindow time.Duration
	// SystemPrompt is what every run's model is told first ("": the
	// default, runloop.DefaultSystemPrompt).
	SystemPrompt string
	// Reach is how the outbox reaches people outside and escalates
	// unanswered actions: its channels, its link base, its timings (the
	// zero value: nobody outside; actions are still marked overdue after
	// the default time). Its Log and Metrics default to the core's.
	Reach outbox.Config
	// Metrics counts what the core does (nil: nothing).
	Metrics *telemetry.Metrics
	// PolicyOrigin says where Policy came from: it seeds the policy
	// versions of a new database, and a file that differs from the version
	// in force is proposed (or, with the file ruling, put in force).
	PolicyOrigin versions.Origin
	// PolicyPeople is how many people sign a policy change, the author
	// counted (0: 2); 1 only with SinglePersonShop.
	PolicyPeople int
	// Limits bound the actions waiting for a person, per conversation,
	// customer, agent and agent session (0s: the gate's defaults).
	Limits           gate.Limits
	SinglePersonShop bool
	// SignWithPasskey asks every approval of a policy version or a staff
	// change for the admin's passkey signature.
	SignWithPasskey bool
	// Shadow is a policy tried beside the one in force (nil: none).
	Shadow policy.Policy
	// Sources are the files Tools and Policy were read from, read again
	// by Reload; ToolSet is the tools file's set in force at start (nil:
	// none), whose MCP servers stay connected until it is replaced, and
	// which the core closes.
	Sources Sources
	ToolSet *httptool.Set
	// AuditKey signs checkpoints of the audit chain into Checkpoints, at
	// Start, every CheckpointEvery (0: an hour) and at Close (nil: none).
	AuditKey        ed25519.PrivateKey
	Checkpoints     string
	CheckpointEvery time.Duration
}

// Core is the core, wired: one notifier told by the gate and the run loop,
// the run loop woken by the gate, the outbox reading the tools in force.
type Core struct {
	Gate     *gate.Gate
	Runner   *runloop.Runner
	Accounts *accounts.Service
	Outbox   *outbox.Outbox
	Versions *versions.Service
	// Receipts signs a receipt for every call that reaches a final status.
	Receipts *receipts.Signer
	// Outside gates the calls of agents Countersign does not run, for the
	// gate API and MCP alike.
	Outside *gate.Outside
	// Bus carries every change to who listens here and to the other
	// instances.
	Bus   *Bus
	Store *storage.Store

	log *slog.Logger
	// alive is how recently an instance must have beaten for its calls to
	// be left alone by recovery (0 on SQLite: one server at a time).
	alive time.Duration
	// policy and origin are what the instance started with (Start adopts
	// them as a policy version).
	policy policy.Policy
	origin versions.Origin

	cfg  Config
	stop context.CancelFunc
	jobs sync.WaitGroup
	// more are the jobs others added (Job) before Start.
	more []namedJob

	// reloading makes one reload at a time; toolSet is the tools file's
	// set in force (intools.go).
	reloading sync.Mutex
	toolSet   *httptool.Set
	// serving is toolSet, read without waiting for a reload.
	serving atomic.Pointer[httptool.Set]
	// keeping: from Start to Close, the set in force is kept connected
	// (keepTools), by keepers Close waits for.
	keeping bool
	keepers sync.WaitGroup
	// toolsWanted notes that an MCP server's tools changed (followTools).
	toolsWanted chan struct{}
}

type namedJob struct {
	name string
	run  func(context.Context)
}

// New builds the core.
func New(cfg Config) (*Core, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bus := newBus(log, cfg.Store)
	g, runner := gateAndRunner(cfg, log, bus)
	if cfg.Shadow != nil {
		g.SetShadow(cfg.Shadow)
	}
	reach := cfg.Reach
	if reach.Log == nil {
		reach.Log = log
	}
	if reach.Metrics == nil {
		reach.Metrics = cfg.Metrics
	}
	ob, err := outbox.New(cfg.Store, reach)
	if err != nil {
		return nil, err
	}
	ob.Attach(g.Tools, bus.ActionChanged, g.AsksPasskeyOf, desk{gate: g, outbox: ob, store: cfg.Store})
	vs, err := versions.New(versions.Config{Store: cfg.Store, Gate: g, Log: log, People: cfg.PolicyPeople,
		SinglePerson: cfg.SinglePersonShop, Host: Hostname(), Announce: bus.PolicyChanged, SignWithPasskey: cfg.SignWithPasskey})
	if err != nil {
		return nil, err
	}
	rs, err := receipts.New(context.Background(), cfg.Store, cfg.AuditKey, log)
	if err != nil {
		return nil, err
	}
	g.SignReceiptsWith(rs.SignWithin)
	c := &Core{Gate: g, Runner: runner, Accounts: accounts.New(cfg.Store), Outbox: ob, Versions: vs, Receipts: rs, Bus: bus, Store: cfg.Store,
		Outside: &gate.Outside{Gate: g, Store: cfg.Store, Changed: bus.WatchAction},
		log:     log, cfg: cfg, stop: func() {}, policy: cfg.Policy, origin: cfg.PolicyOrigin}
	c.Accounts.Mailer = ob // enrollment links go by email when it reaches people
	c.Accounts.SignWithPasskey = cfg.SignWithPasskey
	c.Accounts.Revoked = bus.AgentRevoked
	bus.repin, bus.resync = g.Repin, c.resync
	c.toolsWanted = make(chan struct{}, 1)
	c.toolSet = cfg.ToolSet
	c.serving.Store(cfg.ToolSet)
	c.watchTools(cfg.ToolSet)
	if cfg.Store.Shared() {
		c.alive = models.InstanceAlive
	}
	return c, nil
}

// gateAndRunner builds the gate and the run loop over one store, wired to
// each other: the run loop asks the gate (runloop.Gate), and an action that
// settles wakes its paused run (gate.Runs); every change is told to the
// notifier.
func gateAndRunner(cfg Config, log *slog.Logger, bus *Bus) (*gate.Gate, *runloop.Runner) {
	runs := &settledRuns{}
	gc := gate.Config{Store: cfg.Store, Tools: cfg.Tools, Policy: cfg.Policy, ToolsVersion: cfg.ToolsVersion,
		Log: log, Business: cfg.Business, Runs: runs, ExecutionWait: cfg.ExecutionWait, IntentWindow: cfg.IntentWindow, Metrics: cfg.Metrics}
	rc := runloop.Config{Store: cfg.Store, Model: cfg.Model, Log: log, SystemPrompt: cfg.SystemPrompt}
	gc.Notifier, rc.Notifier = bus, bus
	g := gate.New(gc)
	g.Limits = cfg.Limits
	rc.Gate = g
	runs.r = runloop.New(rc)
	return g, runs.r
}

// settledRuns hands the gate's news of a settled action to the run loop,
// which is built after the gate it asks.
type settledRuns struct{ r *runloop.Runner }

func (s *settledRuns) Settled(runID string) { s.r.Settled(runID) }

// Started says what Start found to carry on.
type Started struct {
	Rerun, Unknown int // calls caught running by a crash: run again, or left for a person
	Resumed        int // runs that were working or waiting for a decision
}

// Start carries on after a restart (calls caught running, runs in
// progress), then starts the background jobs, each by name: the outbox's
// deliveries and, sharing PostgreSQL, the heartbeat that takes over what a
// stopped instance left. They run until Close (or ctx ends).
func (c *Core) Start(ctx context.Context) (Started, error) {
	var st Started
	var err error
	// Every instance beats, one on SQLite too (/policy shows its last
	// beat); sharing PostgreSQL, a stale beat lets another take over.
	if err := c.Store.Beat(ctx, Hostname()); err != nil {
		return st, err
	}
	if err := c.Versions.Settle(ctx); err != nil {
		return st, err
	}
	propose, err := c.adoptPolicy(ctx)
	if err != nil {
		return st, err
	}
	if st.Rerun, st.Unknown, err = c.Gate.RecoverInterrupted(ctx, c.alive); err != nil {
		return st, err
	}
	if st.Resumed, err = c.Runner.ResumeRuns(ctx); err != nil {
		return st, err
	}
	if c.Outbox.Enabled() {
		c.Outbox.Install()
	}
	if err := c.recordInForce(ctx); err != nil {
		return st, err
	}
	c.checkpoint(ctx) // the head as this process finds it
	ctx, c.stop = context.WithCancel(ctx)
	c.job(ctx, "outbox", func(ctx context.Context) { c.Outbox.Run(ctx, time.Second) })
	for _, j := range c.Outbox.Jobs() { // a channel's own (Slack's clicks)
		c.job(ctx, j.Name, j.Run)
	}
	c.job(ctx, "sweep", c.sweep)
	c.job(ctx, "follow the audit log", c.follow)
	c.job(ctx, "follow the MCP servers' tool lists", c.followTools)
	c.job(ctx, "receipts", c.Receipts.Run) // first what a crash left unsigned
	if c.cfg.AuditKey != nil {
		c.job(ctx, "audit checkpoints", c.checkpoints)
	}
	if propose {
		c.job(ctx, "propose the policy file", func(ctx context.Context) { c.proposeFile(ctx) })
	}
	c.job(ctx, "heartbeat", c.beat)
	if c.alive > 0 {
		c.job(ctx, "bus", c.Bus.share)
	}
	for _, j := range c.more {
		c.job(ctx, j.name, j.run)
	}
	c.reloading.Lock()
	c.keeping = true
	c.keepTools(c.toolSet)
	c.reloading.Unlock()
	return st, nil
}

// Job adds a background job (the web side's live pages, say) that Start
// starts with the core's own and Close stops with them. It is called
// before Start.
func (c *Core) Job(name string, run func(context.Context)) {
	c.more = append(c.more, namedJob{name, run})
}

// adoptPolicy makes the policy the instance started with a policy version
// (the first of a new database, or a file's, proposed or ruling) and puts
// the version in force in the database in force here: an instance that
// cannot load it starts, says so, and decides nothing (fail closed). It
// says whether the file is still to be proposed.
func (c *Core) adoptPolicy(ctx context.Context) (bool, error) {
	fp, ok := c.policy.(*policy.FilePolicy)
	if !ok {
		return false, nil // a Go policy is the integrator's own: it is not versioned here
	}
	propose, err := c.Versions.Adopt(ctx, fp, c.origin)
	if err != nil {
		return false, err
	}
	if err := c.Versions.Sync(ctx); err != nil {
		c.log.Error("started without a policy to decide with: every call is denied until the version in force loads here", "err", err)
	}
	return propose, nil
}

// proposeFile proposes the policy file the instance started with, which
// differs from the version in force.
func (c *Core) proposeFile(ctx context.Context) {
	v, err := c.Versions.ProposeFile(ctx, c.policy.(*policy.FilePolicy), c.origin)
	switch {
	case err != nil && ctx.Err() == nil:
		c.log.Error("the policy file differs from the version in force and could not be proposed", "file", c.origin.File, "err", err)
	case v != nil:
		c.log.Warn("the policy file differs from the version in force: proposed it; it is in force once admins countersign it on /policy",
			"file", c.origin.File, "policy_version_id", v.ID)
	}
}

// job runs one background job until ctx ends.
func (c *Core) job(ctx context.Context, name string, run func(context.Context)) {
	c.jobs.Add(1)
	go func() {
		defer c.jobs.Done()
		c.log.Debug("background job started", "job", name)
		run(ctx)
		c.log.Debug("background job stopped", "job", name)
	}()
}

// beat keeps this instance's row alive and, sharing PostgreSQL, every beat
// takes over what an instance that stopped beating left in the middle.
func (c *Core) beat(ctx context.Context) {
	missed := false
	agent.Every(ctx, models.BeatEvery, func(ctx context.Context) { missed = c.beatOnce(ctx, missed) })
}

// beatOnce is one heartbeat; missed says the one before failed, and it
// says whether this one did.
func (c *Core) beatOnce(ctx context.Context, missed bool) bool {
	if err := c.Store.Beat(ctx, Hostname()); err != nil && ctx.Err() == nil {
		c.log.Error("heartbeat failed", "err", err)
		return true
	}
	if c.alive == 0 {
		return false // one instance (SQLite): nobody else's calls to take over
	}
	if missed {
		// The database was away: every instance looked gone at once.
		// Their owners get a beat to come back (and to record the
		// outcomes they kept) before anyone takes their calls.
		return false
	}
	rerun, unknown, err := c.Gate.RecoverInterrupted(ctx, c.alive)
	switch {
	case err != nil && ctx.Err() == nil:
		c.log.Error("recovering another instance's calls failed", "err", err)
	case rerun+unknown > 0:
		c.log.Warn("took over the calls of an instance that stopped", "rerun", rerun, "unknown", unknown)
		c.Receipts.Kick() // what it ended before it stopped may be unsigned
	}
	return false
}

// Close stops the background jobs and waits for them, then the run loop
// after the steps in progress finish, then the gate after the approved calls
// running finish (gate.Close), and (sharing PostgreSQL) says this
// instance has left. The store stays open: it is the caller's.
func (c *Core) Close() {
	c.Outside.StopWaiting() // nothing waits on a client any longer (a server's question, a hold)
	c.stop()
	c.jobs.Wait()
	c.Runner.Close()
	c.Gate.Close()
	c.closeTools()
	c.keepers.Wait()
	c.checkpoint(context.Background()) // the head as this process leaves it
	if c.alive > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Store.Leave(ctx)
	}
}

// Hostname is this machine's name, as instances record it.
func Hostname() string {
	h, _ := os.Hostname()
	return h
}

// Evidence is a final call's evidence bundle, anchored at the nearest
// checkpoint this deployment wrote.
func (c *Core) Evidence(ctx context.Context, callID string) (*receipts.Bundle, error) {
	var pub ed25519.PublicKey
	if c.cfg.AuditKey != nil {
		pub = c.cfg.AuditKey.Public().(ed25519.PublicKey)
	}
	return c.Receipts.Evidence(ctx, callID, c.cfg.Checkpoints, pub)
}
