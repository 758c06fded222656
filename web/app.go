package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent/core"
	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
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
	// instances, and what changes there is heard here (Share).
	shared atomic.Pointer[storage.Store]
	// telling holds the changes waiting to be told to the other instances:
	// told by one goroutine (Share), never on the request that made them.
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
func (c *Changes) RunChanged(ev runloop.Event) {
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
func (c *Changes) tellAll(ctx context.Context, store *storage.Store) {
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

// Share makes the changes of every instance on the store's PostgreSQL
// database reach this one's pages and streams, until ctx ends. While the
// listening connection is down, the queue pages are refreshed every two
// seconds instead (and once more when it is back): nothing is missed, only
// later. Run streams catch up by themselves when they reconnect.
func (c *Changes) Share(ctx context.Context, store *storage.Store) {
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
	ev := runloop.Event{RunID: ch.Run, Status: models.RunStatus(ch.Status)}
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

// NewFor is the web server over a core: the pages, the APIs and MCP over
// its gate, run loop, accounts and outbox, told of changes by changes (the
// notifier the core was built with). Its own background work (Server.Run,
// and Changes.Share on PostgreSQL) is the caller's to start.
func NewFor(c *core.Core, store *storage.Store, changes *Changes, cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Gate, cfg.Runner, cfg.Store, cfg.Changes, cfg.Accounts, cfg.Outbox = c.Gate, c.Runner, store, changes, c.Accounts, c.Outbox
	cfg.Versions = c.Versions
	return New(cfg)
}
