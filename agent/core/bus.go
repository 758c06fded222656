package core

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/agent/runloop"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools/upstream"
)

// Bus carries what changes (an action, a run's turn or status, the tools
// in force, the policy version in force) one way: from the gate, the run
// loop and the policy versions to whoever listens in this process (the web
// side's live pages, outside calls waiting for a person) and, sharing
// PostgreSQL, to every other instance, on one channel. The core's catch-up
// job polls for what a lost notice missed.
type Bus struct {
	log *slog.Logger

	// listeners is replaced whole by Listen (read without a lock or a
	// copy on every change).
	listeners atomic.Pointer[[]any]
	mu        sync.Mutex
	actions   map[string]map[chan struct{}]struct{}

	// shared: on PostgreSQL, what changes here is told to the other
	// instances (one goroutine, never on the request that made the change).
	shared  *storage.Store
	telling chan notice
	// down: not hearing the other instances (catch-up polls meanwhile).
	down atomic.Bool

	// Heard from another instance: the tools' pins or the policy version
	// in force changed (set by New).
	repin, resync func()
}

// What a listener hears is what it implements of these, Offers and
// Revoked: one typed event each.
type (
	// Actions hears that an action changed (a call was held, decided,
	// ran), here or on another instance.
	Actions interface{ ActionChanged(callID string) }
	// RunTurns hears a run's new turn or status.
	RunTurns interface{ RunChanged(ev runloop.Event) }
	// Tools hears that the tools in force changed.
	Tools interface{ ToolsChanged() }
	// Missed hears that notices from other instances may have been lost:
	// what it shows should be looked at again.
	Missed interface{ Missed() }
)

// MaxUntold is how many notices may wait to be told to the other
// instances; past that (the database not answering) one is dropped, and
// the other instances catch up when they next hear or poll.
const MaxUntold = 4096

// busChannel is the PostgreSQL channel the instances tell each other on.
const busChannel = "countersign_changes"

// notice is one change between instances.
type notice struct {
	From   string `json:"from"`             // the instance it happened on
	Action string `json:"action,omitempty"` // a changed action's id
	Run    string `json:"run,omitempty"`    // a run with a new turn or status
	Seq    int64  `json:"seq,omitempty"`    // the new turn's number
	Status string `json:"status,omitempty"` // the run's new status
	Tools  bool   `json:"tools,omitempty"`  // the tools' pins changed
	Policy bool   `json:"policy,omitempty"` // the policy version in force changed
	Agent  string `json:"agent,omitempty"`  // an agent whose key was revoked
}

func newBus(log *slog.Logger, store *storage.Store) *Bus {
	b := &Bus{log: log, actions: map[string]map[chan struct{}]struct{}{}, repin: func() {}, resync: func() {}}
	if store.Shared() {
		b.shared, b.telling = store, make(chan notice, MaxUntold)
	}
	return b
}

// Listen adds l to those told of the changes made here or heard from
// another instance that it hears: each of Actions, RunTurns, Tools,
// Offers, Revoked and Missed it implements.
func (b *Bus) Listen(l any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ls []any
	if cur := b.listeners.Load(); cur != nil {
		ls = slices.Clone(*cur)
	}
	ls = append(ls, l)
	b.listeners.Store(&ls)
}

// tell calls f for each listener that hears T.
func tell[T any](b *Bus, f func(T)) {
	if ls := b.listeners.Load(); ls != nil {
		for _, l := range *ls {
			if t, ok := l.(T); ok {
				f(t)
			}
		}
	}
}

// WatchAction follows one action: the channel is signalled (at most one
// signal waits) whenever it changes, here or on another instance, until
// stop.
func (b *Bus) WatchAction(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.actions[id] == nil {
		b.actions[id] = map[chan struct{}]struct{}{}
	}
	b.actions[id][ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.actions[id], ch)
		if len(b.actions[id]) == 0 {
			delete(b.actions, id)
		}
		b.mu.Unlock()
	}
}

func (b *Bus) actionHere(id string) {
	b.mu.Lock()
	for ch := range b.actions[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	b.mu.Unlock()
	tell(b, func(l Actions) { l.ActionChanged(id) })
}

// ActionChanged implements gate.Notifier.
func (b *Bus) ActionChanged(id string) {
	b.actionHere(id)
	b.tell(notice{Action: id})
}

// RunChanged implements runloop.Notifier.
func (b *Bus) RunChanged(ev runloop.Event) {
	tell(b, func(l RunTurns) { l.RunChanged(ev) })
	n := notice{Run: ev.RunID, Status: string(ev.Status)}
	if ev.Turn != nil {
		n.Seq = ev.Turn.Seq
	}
	b.tell(n)
}

// ToolsChanged implements gate.Notifier: the tools in force changed here.
func (b *Bus) ToolsChanged() {
	tell(b, func(l Tools) { l.ToolsChanged() })
	b.tell(notice{Tools: true})
}

// Offers is what a listener also implements when it offers what the tools
// file's MCP servers offer besides tools (prompts, resources), and what
// they say for clients to hear (Told).
type Offers interface {
	OffersChanged()
	Told(t upstream.Told)
}

// OffersChanged tells the listeners here that what the tools file's MCP
// servers offer besides tools may have changed (each instance has its own
// connections: nothing is told to the others). They are told on a
// goroutine of their own: the teller may hold the reload's lock, which
// they may need.
func (b *Bus) OffersChanged() {
	go tell(b, func(l Offers) { l.OffersChanged() })
}

// Told tells the listeners here what an MCP server said that MCP clients
// are to hear: a resource a client subscribed to changed, a list said
// changed that is the same (each instance has its own connections).
func (b *Bus) Told(t upstream.Told) {
	tell(b, func(l Offers) { l.Told(t) })
}

// PolicyChanged tells the other instances that the policy version in
// force changed.
func (b *Bus) PolicyChanged() { b.tell(notice{Policy: true}) }

func (b *Bus) tell(n notice) {
	if b.shared == nil {
		return
	}
	n.From = b.shared.Instance()
	select {
	case b.telling <- n:
	default:
		b.log.Warn("too many changes waiting to be told to the other instances; one was dropped", "action", n.Action, "run", n.Run)
	}
}

// share tells the other instances what changes here and hears what
// changes there, until ctx ends (PostgreSQL only).
func (b *Bus) share(ctx context.Context) {
	go b.listen(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-b.telling:
			raw, _ := json.Marshal(n)
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := b.shared.Notify(nctx, busChannel, string(raw)); err != nil && ctx.Err() == nil {
				b.log.Warn("could not tell the other instances", "err", err)
			}
			cancel()
		}
	}
}

func (b *Bus) listen(ctx context.Context) {
	b.shared.Listen(ctx, busChannel, func(payload string) { b.heard(ctx, payload) },
		func() {
			if b.down.Swap(false) {
				b.catchUp()
			}
		},
		func(err error) {
			if !b.down.Swap(true) {
				b.log.Warn("not hearing the other instances; polling until it is back", "err", err)
			}
		})
}

// heard passes on a change made on another instance.
func (b *Bus) heard(ctx context.Context, payload string) {
	var n notice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.From == b.shared.Instance() {
		return
	}
	if n.Tools {
		b.repin()
	}
	if n.Policy {
		b.resync()
	}
	if n.Action != "" {
		b.actionHere(n.Action)
	}
	if n.Agent != "" {
		b.revokedHere(n.Agent)
	}
	if n.Run == "" {
		return
	}
	ev := runloop.Event{RunID: n.Run, Status: models.RunStatus(n.Status)}
	if n.Seq > 0 {
		turns, err := b.shared.Turns(ctx, n.Run, n.Seq-1)
		if err != nil || len(turns) == 0 {
			return
		}
		ev.Turn = &turns[0]
	}
	tell(b, func(l RunTurns) { l.RunChanged(ev) })
}

// catchUp is what a lost notice may have missed, looked at again: the
// pins, the policy version in force, every watched action, and what the
// listeners show.
func (b *Bus) catchUp() {
	b.repin()
	b.resync()
	b.mu.Lock()
	for _, chs := range b.actions {
		for ch := range chs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	b.mu.Unlock()
	tell(b, func(l Missed) { l.Missed() })
}
