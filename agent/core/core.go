// Package core is Countersign's core as one process holds it: the gate and
// the run loop over one store, the accounts, the outbox, and the
// background jobs that keep them going (recovery, resuming runs, the
// outbox's deliveries, the heartbeat on PostgreSQL). The command builds
// it, hands its parts to the web server and starts its jobs; Close stops
// them in order.
package core

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Config is what the core is built from: the store, the tools, the policy
// and the model, and who is told of changes.
type Config struct {
	Store *models.Store
	Tools *tools.Registry
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Policy       policy.Policy
	Model        llm.Model
	Business     gate.BusinessFacts // nil: no business facts
	Log          *slog.Logger
	// Notifier is told of every change (the web side's, which feeds the
	// pages and streams); nil: nobody watches.
	Notifier agent.Notifier
	// ExecutionWait is how long an approval waits for its call (0: 10 s).
	ExecutionWait time.Duration
	// SystemPrompt is what every run's model is told first ("": the
	// default, runloop.DefaultSystemPrompt).
	SystemPrompt string
	// Outbox reaches people outside and escalates unanswered actions
	// (nil: nobody outside; actions are still marked overdue after the
	// default time).
	Outbox *outbox.Outbox
	// Metrics counts what the core does (nil: nothing).
	Metrics *telemetry.Metrics
}

// Core is the core, wired: one notifier told by the gate and the run loop,
// the run loop woken by the gate, the outbox reading the tools in force.
type Core struct {
	Gate     *gate.Gate
	Runner   *runloop.Runner
	Accounts *accounts.Service
	Outbox   *outbox.Outbox

	store *models.Store
	log   *slog.Logger
	// alive is how recently an instance must have beaten for its calls to
	// be left alone by recovery (0 on SQLite: one server at a time).
	alive time.Duration

	stop context.CancelFunc
	jobs sync.WaitGroup
}

// New builds the core.
func New(cfg Config) *Core {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	gate, runner := agent.New(agent.Config{Store: cfg.Store, Tools: cfg.Tools, ToolsVersion: cfg.ToolsVersion, Policy: cfg.Policy,
		Model: cfg.Model, Log: log, Notifier: cfg.Notifier, Business: cfg.Business, ExecutionWait: cfg.ExecutionWait,
		SystemPrompt: cfg.SystemPrompt, Metrics: cfg.Metrics})
	ob := cfg.Outbox
	if ob == nil {
		ob, _ = outbox.New(cfg.Store, outbox.Config{Log: log}) // the zero config is valid
	}
	changed := func(string) {}
	if cfg.Notifier != nil {
		changed = cfg.Notifier.ActionChanged
	}
	ob.Attach(gate.Tools, changed)
	c := &Core{Gate: gate, Runner: runner, Accounts: accounts.New(cfg.Store), Outbox: ob, store: cfg.Store, log: log,
		stop: func() {}}
	if cfg.Store.Shared() {
		c.alive = models.InstanceAlive
	}
	return c
}

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
	if c.alive > 0 {
		if err := c.store.Beat(ctx, Hostname()); err != nil {
			return st, err
		}
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
	ctx, c.stop = context.WithCancel(ctx)
	c.job(ctx, "outbox", func(ctx context.Context) { c.Outbox.Run(ctx, time.Second) })
	if c.alive > 0 {
		c.job(ctx, "heartbeat", c.beat)
	}
	return st, nil
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

// beat keeps this instance alive in the shared database and, every beat,
// takes over what an instance that stopped beating left in the middle.
func (c *Core) beat(ctx context.Context) {
	t := time.NewTicker(models.BeatEvery)
	defer t.Stop()
	missed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.store.Beat(ctx, Hostname()); err != nil && ctx.Err() == nil {
			c.log.Error("heartbeat failed", "err", err)
			missed = true
			continue
		}
		if missed {
			// The database was away: every instance looked gone at once.
			// Their owners get a beat to come back (and to record the
			// outcomes they kept) before anyone takes their calls.
			missed = false
			continue
		}
		rerun, unknown, err := c.Gate.RecoverInterrupted(ctx, c.alive)
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Error("recovering another instance's calls failed", "err", err)
		case rerun+unknown > 0:
			c.log.Warn("took over the calls of an instance that stopped", "rerun", rerun, "unknown", unknown)
		}
	}
}

// Close stops the background jobs and waits for them, then the run loop
// after the steps in progress finish, then the gate after the approved calls
// running finish (gate.Close), and (sharing PostgreSQL) says this
// instance has left. The store stays open: it is the caller's.
func (c *Core) Close() {
	c.stop()
	c.jobs.Wait()
	c.Runner.Close()
	c.Gate.Close()
	if c.alive > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.store.Leave(ctx)
	}
}

// Hostname is this machine's name, as instances record it.
func Hostname() string {
	h, _ := os.Hostname()
	return h
}
