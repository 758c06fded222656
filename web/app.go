package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/accounts"
	"github.com/countersign/countersign/agent/llm"
	"github.com/countersign/countersign/agent/outbox"
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
	log   *slog.Logger

	mu    sync.Mutex
	tools []func() // told when the tools in force change

	// shared: on PostgreSQL, what changes here is told to the other
	// instances, and what changes there is heard here (share).
	shared atomic.Pointer[models.Store]
	// telling holds the changes waiting to be told to the other instances:
	// told by one goroutine (share), never on the request that made them.
	telling chan change
}

// MaxUntold is how many changes may wait to be told to the other
// instances; past that (the database not answering) a change is dropped,
// and the other instances' pages catch up when they next hear or poll.
const MaxUntold = 4096

// changesChannel is the PostgreSQL channel the instances tell each other on.
const changesChannel = "countersign_changes"

// change is one notification between instances.
type change struct {
	From   string `json:"from"`             // the instance it happened on
	Action string `json:"action,omitempty"` // a changed action's id
	Run    string `json:"run,omitempty"`    // a run with a new turn or status
	Seq    int64  `json:"seq,omitempty"`    // the new turn's number
	Status string `json:"status,omitempty"` // the run's new status
}

// NewChanges builds an empty notifier.
func NewChanges(log *slog.Logger) *Changes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Changes{queue: NewQueueHub(log), runs: NewBroker(), log: log, telling: make(chan change, MaxUntold)}
}

// ActionChanged tells the pages that show the action, and the queue, here
// and on the other instances.
func (c *Changes) ActionChanged(callID string) {
	c.queue.Changed(callID)
	c.tell(change{Action: callID})
}

// RunChanged tells the streams that follow the run, here and on the other
// instances.
func (c *Changes) RunChanged(ev agent.RunEvent) {
	c.runs.Publish(ev)
	ch := change{Run: ev.RunID, Status: string(ev.Status)}
	if ev.Turn != nil {
		ch.Seq = ev.Turn.Seq
	}
	c.tell(ch)
}

func (c *Changes) tell(ch change) {
	shared := c.shared.Load()
	if shared == nil {
		return
	}
	ch.From = shared.Instance()
	select {
	case c.telling <- ch:
	default:
		c.log.Warn("too many changes waiting to be told to the other instances; one was dropped", "action", ch.Action, "run", ch.Run)
	}
}

// tellAll tells the other instances the changes made here, one at a time,
// until ctx ends.
func (c *Changes) tellAll(ctx context.Context, store *models.Store) {
	for {
		select {
		case <-ctx.Done():
			return
		case ch := <-c.telling:
			b, _ := json.Marshal(ch)
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := store.Notify(nctx, changesChannel, string(b)); err != nil && ctx.Err() == nil {
				c.log.Warn("could not tell the other instances", "err", err)
			}
			cancel()
		}
	}
}

// share makes the changes of every instance on the store's PostgreSQL
// database reach this one's pages and streams, until ctx ends. While the
// listening connection is down, the queue pages are refreshed every two
// seconds instead (and once more when it is back): nothing is missed, only
// later. Run streams catch up by themselves when they reconnect.
func (c *Changes) share(ctx context.Context, store *models.Store) {
	c.shared.Store(store)
	go c.tellAll(ctx, store)
	var down atomic.Bool
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if down.Load() {
					c.queue.ChangedAll()
				}
			}
		}
	}()
	go store.Listen(ctx, changesChannel, func(payload string) { c.heard(ctx, payload) },
		func() {
			if down.Swap(false) {
				c.queue.ChangedAll()
			}
		},
		func(err error) {
			if !down.Swap(true) {
				c.log.Warn("not hearing the other instances; polling until it is back", "err", err)
			}
		})
}

// heard passes on a change made on another instance.
func (c *Changes) heard(ctx context.Context, payload string) {
	var ch change
	shared := c.shared.Load()
	if err := json.Unmarshal([]byte(payload), &ch); err != nil || ch.From == shared.Instance() {
		return
	}
	if ch.Action != "" {
		c.queue.Changed(ch.Action)
	}
	if ch.Run == "" {
		return
	}
	ev := agent.RunEvent{RunID: ch.Run, Status: models.RunStatus(ch.Status)}
	if ch.Seq > 0 {
		turns, err := shared.Turns(ctx, ch.Run, ch.Seq-1)
		if err != nil || len(turns) == 0 {
			return
		}
		ev.Turn = &turns[0]
	}
	c.runs.Publish(ev)
}

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

// AppConfig is what a whole app is built from: the store, the tools, the
// policy and the model; Web holds the server's own settings.
type AppConfig struct {
	Store  *models.Store
	Tools  *tools.Registry
	Policy policy.Policy
	// ToolsVersion covers the tools file Tools came from ("" without one).
	ToolsVersion string
	Model        llm.Model
	Business     agent.BusinessFacts // nil: no business facts
	Log          *slog.Logger
	// ExecutionWait is how long an approval waits for its call (0: 10 s).
	ExecutionWait time.Duration
	// SystemPrompt is what every run's model is told first ("": the
	// default, agent.DefaultSystemPrompt).
	SystemPrompt string
	// Outbox reaches people outside and escalates unanswered actions
	// (nil: nobody outside; actions are still marked overdue after the
	// default time).
	Outbox *outbox.Outbox
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
	Outbox   *outbox.Outbox

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
	gate, runner := agent.New(agent.Config{Store: cfg.Store, Tools: cfg.Tools, ToolsVersion: cfg.ToolsVersion, Policy: cfg.Policy, Model: cfg.Model,
		Log: log, Notifier: changes, Business: cfg.Business, ExecutionWait: cfg.ExecutionWait,
		SystemPrompt: cfg.SystemPrompt})
	ob := cfg.Outbox
	if ob == nil {
		ob, _ = outbox.New(cfg.Store, outbox.Config{Log: log}) // the zero config is valid
	}
	ob.Attach(gate.Tools, changes.ActionChanged)
	a := &App{Gate: gate, Runner: runner, Accounts: accounts.New(cfg.Store), Changes: changes, Outbox: ob, store: cfg.Store}
	if cfg.Store.Postgres() {
		a.alive = models.InstanceAlive
	}
	w := cfg.Web
	w.Log, w.Gate, w.Runner, w.Store, w.Changes, w.Accounts, w.Outbox = log, gate, runner, cfg.Store, changes, a.Accounts, ob
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
	if a.Outbox.Enabled() {
		a.Outbox.Install()
	}
	go a.Outbox.Run(ctx, time.Second)
	if a.alive > 0 {
		go a.beat(ctx)
		a.Changes.share(ctx, a.store)
	}
	return st, nil
}

// beat keeps this instance alive in the shared database and, every beat,
// takes over what an instance that stopped beating left in the middle.
func (a *App) beat(ctx context.Context) {
	t := time.NewTicker(models.BeatEvery)
	defer t.Stop()
	log := a.Server.cfg.Log
	missed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.store.Beat(ctx, hostname()); err != nil && ctx.Err() == nil {
			log.Error("heartbeat failed", "err", err)
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
