// Package outbox reaches people where they are: a signed webhook for the
// business's own systems, a Slack message approvers can act on, an email to
// those who may decide. It also escalates actions nobody answers.
//
// Nothing here can hold up the gate or a decision. Record turns an audit
// event into deliveries inside the event's own transaction (the models
// outbox hook), so a change and the news of it commit together; Run sends
// what is due after the commit, on every instance, each delivery claimed by
// one, tried again with backoff when the receiver fails, also after a
// restart, and every attempt is audited (ARCHITECTURE.md, "Reaching people").
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Config says whom to reach and how. The zero value reaches nobody.
type Config struct {
	// Channels are the ways people are reached (channels/webhook,
	// channels/slack, channels/email, or a channel of your own), each
	// built and checked from its own configuration.
	Channels []Channel
	// EscalateAfter is how long a pending action may wait before it is
	// marked overdue and supervisors are told (0: 15 minutes; negative:
	// never). RemindBefore is how long before an action expires its
	// approvers are reminded (0: 5 minutes; negative: never).
	EscalateAfter time.Duration
	RemindBefore  time.Duration
	// Changed is told of an action marked overdue (the queue shows it).
	Changed func(callID string)
	// Link is the back-office address of an action.
	Link func(callID string) string
	// Base is the back office's public address (--public-url), for links
	// to other pages ("": paths alone).
	Base string
	// Tools is the registry in force, to say what a call asks for.
	Tools func() *tools.Registry
	Log   *slog.Logger
	// Metrics counts the deliveries (nil: nothing).
	Metrics *telemetry.Metrics
}

// Defaults of Config.
const (
	DefaultEscalateAfter = 15 * time.Minute
	DefaultRemindBefore  = 5 * time.Minute
	// MaxAttempts is how often a delivery is tried before it is given up.
	MaxAttempts = 8
	// KeepDeliveries is how long a delivery that ended (delivered or given
	// up) is kept; its attempts stay in the audit log.
	KeepDeliveries = 30 * 24 * time.Hour
)

// Outbox is the deliveries of one store.
type Outbox struct {
	store *storage.Store
	cfg   Config
	kick  chan struct{}
	// asksPasskey says whether a rule's decisions are signed with a
	// passkey (a channel then offers the back office, not Approve).
	asksPasskey func(call *models.ToolCall) bool
	// desk carries out the decisions that come in through a channel.
	desk Desk
}

// New builds the outbox over its channels. Install it on the store
// (Install) and start it (Run).
func New(store *storage.Store, cfg Config) (*Outbox, error) {
	names := map[string]bool{}
	for _, ch := range cfg.Channels {
		if names[ch.Name()] {
			return nil, fmt.Errorf("two channels are named %q", ch.Name())
		}
		names[ch.Name()] = true
	}
	o := &Outbox{store: store, cfg: cfg, kick: make(chan struct{}, 1)}
	if o.cfg.EscalateAfter == 0 {
		o.cfg.EscalateAfter = DefaultEscalateAfter
	}
	if o.cfg.RemindBefore == 0 {
		o.cfg.RemindBefore = DefaultRemindBefore
	}
	if o.cfg.Log == nil {
		o.cfg.Log = slog.New(slog.DiscardHandler)
	}
	if o.cfg.Link == nil {
		o.cfg.Link = func(id string) string { return "/actions/" + id }
	}
	return o, nil
}

// Enabled says whether anyone is to be reached.
func (o *Outbox) Enabled() bool { return len(o.cfg.Channels) > 0 }

// Install makes the store's audit events pass through Record.
func (o *Outbox) Install() { o.store.SetOutbox(o.Record) }

// Kick makes Run look for due deliveries now.
func (o *Outbox) Kick() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Run sends due deliveries and escalates unanswered actions until ctx ends.
func (o *Outbox) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	var pruned time.Time
	for {
		if _, _, err := o.Escalate(ctx); err != nil && ctx.Err() == nil {
			o.cfg.Log.Error("escalating unanswered actions failed", "err", err)
		}
		if now := o.store.Now(); now.Sub(pruned) >= time.Hour {
			pruned = now
			if _, err := o.Prune(ctx); err != nil && ctx.Err() == nil {
				o.cfg.Log.Error("pruning old deliveries failed", "err", err)
			}
		}
		if err := o.dispatch(ctx, &wg); err != nil && ctx.Err() == nil {
			o.cfg.Log.Error("sending deliveries failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-o.kick:
		}
	}
}

// Prune deletes the deliveries that ended more than KeepDeliveries ago, a
// thousand at a time, and says how many it deleted. Run does it hourly.
func (o *Outbox) Prune(ctx context.Context) (int64, error) {
	var total int64
	before := o.store.Now().Add(-KeepDeliveries)
	for {
		n, err := o.store.PruneDeliveries(ctx, before, 1000)
		total += n
		if err != nil || n < 1000 {
			return total, err
		}
	}
}

// DeliverDue sends every delivery due now and waits for the attempts: the
// loop's work once, for tests and the command line.
func (o *Outbox) DeliverDue(ctx context.Context) error {
	var wg sync.WaitGroup
	err := o.dispatch(ctx, &wg)
	wg.Wait()
	return err
}

// claimHold is how long a claimed delivery is this instance's: longer than
// any attempt takes (30 s), so neither this loop nor another instance
// claims it again while it is being sent.
const claimHold = time.Minute

func (o *Outbox) dispatch(ctx context.Context, wg *sync.WaitGroup) error {
	due, err := o.store.ClaimDeliveries(ctx, 32, claimHold)
	if err != nil {
		return err
	}
	for _, d := range due {
		wg.Go(func() { o.attempt(ctx, d) })
	}
	return nil
}

// attempt sends one delivery and records how it went.
func (o *Outbox) attempt(ctx context.Context, d models.Delivery) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ref, err := o.send(sctx, d)
	cancel()
	if ctx.Err() != nil {
		return // shutting down: the claim lapses and the delivery is tried again
	}
	a := models.Attempt{OK: err == nil, Ref: ref}
	if err != nil {
		a.Error = err.Error()
		var final Permanent
		if !errors.As(err, &final) && d.Attempts+1 < MaxAttempts {
			at := o.store.Now().Add(Backoff(d.Attempts + 1))
			a.Retry = &at
		}
		o.cfg.Log.Warn("delivery failed", "channel", d.Channel, "target", d.Target, "event", d.Event,
			"attempt", d.Attempts+1, "err", err, "retry", a.Retry != nil)
	}
	if err := o.store.FinishAttempt(ctx, d, a); err != nil {
		if ctx.Err() == nil {
			o.cfg.Log.Error("could not record a delivery attempt", "delivery", d.ID, "err", err)
		}
		return // not recorded: not counted, and tried again
	}
	switch {
	case a.OK:
		o.cfg.Metrics.Delivered(d.Channel, "delivered", o.store.Now().Sub(d.CreatedAt))
		o.Kick() // the next delivery of the same subject may be due
	case a.Retry != nil:
		o.cfg.Metrics.Delivered(d.Channel, "retrying", 0)
	default:
		o.cfg.Metrics.Delivered(d.Channel, "failed", 0)
	}
}

// Backoff is how long to wait after the nth failed attempt: 10 s, 30 s,
// 1.5 min, … up to an hour.
func Backoff(n int) time.Duration {
	d := 10 * time.Second
	for i := 1; i < n && d < time.Hour; i++ {
		d *= 3
	}
	return min(d, time.Hour)
}

func (o *Outbox) send(ctx context.Context, d models.Delivery) (string, error) {
	for _, ch := range o.cfg.Channels {
		if ch.Name() == d.Channel {
			return ch.Send(ctx, d)
		}
	}
	return "", Permanent{fmt.Errorf("the %s channel is no longer set up", d.Channel)}
}

// Attach tells the outbox where the tools in force and the queue's news are
// (core.New does, before Run): what a call asks for is said with the
// tools' phrases, an action marked overdue reaches the queue pages, and
// decisions that come in through a channel are carried out at desk.
func (o *Outbox) Attach(registry func() *tools.Registry, changed func(callID string), asksPasskey func(call *models.ToolCall) bool, desk Desk) {
	o.asksPasskey, o.desk = asksPasskey, desk
	if o.cfg.Tools == nil {
		o.cfg.Tools = registry
	}
	if o.cfg.Changed == nil {
		o.cfg.Changed = changed
	}
}

// Channels says what is set up, for the staff page.
func (o *Outbox) Channels() []string {
	var out []string
	for _, ch := range o.cfg.Channels {
		out = append(out, ch.Describe())
	}
	return out
}

// Route is a channel's inbound route.
type Route struct {
	Channel, Path string
	Handler       http.Handler
}

// Routes are the inbound routes of the channels people answer through,
// for the web side's route table.
func (o *Outbox) Routes() []Route {
	var out []Route
	for _, ch := range o.cfg.Channels {
		if in, ok := ch.(Inbound); ok && o.desk != nil {
			if path, h := in.Route(o.desk); h != nil {
				out = append(out, Route{Channel: ch.Name(), Path: path, Handler: h})
			}
		}
	}
	return out
}

// Links are how the channels that link people to accounts ask for their
// addresses, in the order the channels were given.
func (o *Outbox) Links() []Link {
	var out []Link
	for _, ch := range o.cfg.Channels {
		if l, ok := ch.(Linking); ok {
			out = append(out, l.Link())
		}
	}
	return out
}

// Jobs are the channels' background work, for the root to start.
func (o *Outbox) Jobs() []Job {
	var out []Job
	for _, ch := range o.cfg.Channels {
		if w, ok := ch.(Worker); ok {
			out = append(out, w.Jobs()...)
		}
	}
	return out
}
