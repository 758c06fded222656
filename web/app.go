package web

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// Changes is the in-memory agent.Notifier: a changed action reaches the open
// queue pages and that action's pages (QueueHub), a run's new turn or status
// reaches the streams that follow it (Broker). It only reaches this
// process; several instances need a shared one.
type Changes struct {
	queue *QueueHub
	runs  *Broker

	mu    sync.Mutex
	tools []func() // told when the tools in force change
}

// NewChanges builds an empty notifier.
func NewChanges(log *slog.Logger) *Changes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Changes{queue: NewQueueHub(log), runs: NewBroker()}
}

// ActionChanged tells the pages that show the action, and the queue.
func (c *Changes) ActionChanged(callID string) { c.queue.Changed(callID) }

// RunChanged tells the streams that follow the run.
func (c *Changes) RunChanged(ev agent.RunEvent) { c.runs.Publish(ev) }

// ToolsChanged tells those that offer the tools (the MCP endpoint).
func (c *Changes) ToolsChanged() {
	c.mu.Lock()
	fs := slices.Clone(c.tools)
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// OnToolsChanged adds f to those told when the tools in force change.
func (c *Changes) OnToolsChanged(f func()) {
	c.mu.Lock()
	c.tools = append(c.tools, f)
	c.mu.Unlock()
}

// Streams counts the streams that follow a run.
func (c *Changes) Streams(runID string) int { return c.runs.Streams(runID) }

// AppConfig is what a whole app is built from: the store, the tools, the
// policy and the model; Web holds the server's own settings.
type AppConfig struct {
	Store    *models.Store
	Tools    *tools.Registry
	Policy   policy.Policy
	Model    llm.Model
	Business agent.BusinessFacts // nil: no business facts
	Log      *slog.Logger
	// ExecutionWait is how long an approval waits for its call (0: 10 s).
	ExecutionWait time.Duration
	// Web is the server's settings; NewApp fills in Log, Gate, Runner,
	// Store, Changes and Accounts.
	Web Config
}

// App is the core and the web server over one store, wired together.
type App struct {
	Gate     *agent.Gate
	Runner   *agent.Runner
	Accounts *accounts.Service
	Changes  *Changes
	Server   *Server

	store *models.Store
	// alive is how recently an instance must have beaten for its calls to
	// be left alone by recovery (0 on SQLite: one server at a time).
	alive time.Duration
}

// NewApp wires an app: one notifier told by the gate and the run loop and
// read by the pages and streams, the run loop woken by the gate. It is the
// one place the parts are put together; the command, the tests and the
// benchmarks all build their app with it.
func NewApp(cfg AppConfig) *App {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	changes := NewChanges(log)
	gate, runner := agent.New(agent.Config{Store: cfg.Store, Tools: cfg.Tools, Policy: cfg.Policy, Model: cfg.Model,
		Log: log, Notifier: changes, Business: cfg.Business, ExecutionWait: cfg.ExecutionWait})
	a := &App{Gate: gate, Runner: runner, Accounts: accounts.New(cfg.Store), Changes: changes, store: cfg.Store}
	if cfg.Store.Postgres() {
		a.alive = models.InstanceAlive
	}
	w := cfg.Web
	w.Log, w.Gate, w.Runner, w.Store, w.Changes, w.Accounts = log, gate, runner, cfg.Store, changes, a.Accounts
	a.Server = New(w)
	return a
}

// Started says what Start found to carry on.
type Started struct {
	Rerun, Unknown int // calls caught running by a crash: run again, or left for a person
	Resumed        int // runs that were working or waiting for a decision
}

// Start carries on after a restart (calls caught running, runs in progress)
// and keeps the queue pages live until ctx ends.
func (a *App) Start(ctx context.Context) (Started, error) {
	var st Started
	var err error
	if a.alive > 0 {
		if err := a.store.Beat(ctx, hostname()); err != nil {
			return st, err
		}
	}
	if st.Rerun, st.Unknown, err = a.Gate.RecoverInterrupted(ctx, a.alive); err != nil {
		return st, err
	}
	if st.Resumed, err = a.Runner.ResumeRuns(ctx); err != nil {
		return st, err
	}
	go a.Server.Run(ctx)
	if a.alive > 0 {
		go a.beat(ctx)
	}
	return st, nil
}

// beat keeps this instance alive in the shared database and, every beat,
// takes over what an instance that stopped beating left in the middle.
func (a *App) beat(ctx context.Context) {
	t := time.NewTicker(models.BeatEvery)
	defer t.Stop()
	log := a.Server.cfg.Log
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.store.Beat(ctx, hostname()); err != nil && ctx.Err() == nil {
			log.Error("heartbeat failed", "err", err)
			continue
		}
		rerun, unknown, err := a.Gate.RecoverInterrupted(ctx, a.alive)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("recovering another instance's calls failed", "err", err)
		case rerun+unknown > 0:
			log.Warn("took over the calls of an instance that stopped", "rerun", rerun, "unknown", unknown)
		}
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// Close stops the run loop after the steps in progress finish, and (sharing
// PostgreSQL) says this instance has left.
func (a *App) Close() {
	a.Runner.Close()
	if a.alive > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.store.Leave(ctx)
	}
}
