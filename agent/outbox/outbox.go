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
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/agent/telemetry"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools"
)

// Config says whom to reach and how. The zero value reaches nobody.
type Config struct {
	// Webhooks receive every event as signed JSON (WebhookSecret), or
	// only the types WebhookEvents names (empty: every type, EventTypes).
	Webhooks      []string
	WebhookSecret string
	WebhookEvents []string
	// Slack: SlackWebhook (an incoming webhook's URL) posts messages; with
	// SlackToken and SlackChannel they are posted through Slack's Web API
	// instead, which can also update them when the action is decided.
	SlackWebhook string
	SlackToken   string
	SlackChannel string
	SlackAPIURL  string // tests: a Slack of their own ("" is Slack's)
	// SMTPURL (smtp://user:pass@host:587, smtps://… for TLS from the
	// start) and MailFrom send email to staff.
	SMTPURL  string
	MailFrom string
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
	Tools  func() *tools.Registry
	Client *http.Client // nil: a client with a 10 s timeout
	Log    *slog.Logger
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
	smtp  *smtpTarget
	kick  chan struct{}
	// asksPasskey says whether a rule's decisions are signed with a
	// passkey: Slack then offers no Approve button (Attach).
	asksPasskey func(call *models.ToolCall) bool
}

// New checks the configuration and builds the outbox. Install it on the
// store (Install) and start it (Run).
func New(store *storage.Store, cfg Config) (*Outbox, error) {
	for _, u := range cfg.Webhooks {
		if err := checkURL("--webhook", u); err != nil {
			return nil, err
		}
	}
	if len(cfg.Webhooks) > 0 && cfg.WebhookSecret == "" {
		return nil, errors.New("--webhook needs --webhook-secret: receivers must be able to check that an event came from here")
	}
	for _, t := range cfg.WebhookEvents {
		if !slices.Contains(EventTypes, EventType(t)) {
			return nil, fmt.Errorf("--webhook-events: there is no event type %q; the types are: %s", t, TypeNames(", "))
		}
	}
	if cfg.SlackWebhook != "" {
		if err := checkURL("--slack-webhook", cfg.SlackWebhook); err != nil {
			return nil, err
		}
	}
	if (cfg.SlackToken == "") != (cfg.SlackChannel == "") {
		return nil, errors.New("--slack-token and --slack-channel go together")
	}
	o := &Outbox{store: store, cfg: cfg, kick: make(chan struct{}, 1)}
	if cfg.SMTPURL != "" {
		t, err := parseSMTP(cfg.SMTPURL, cfg.MailFrom)
		if err != nil {
			return nil, err
		}
		o.smtp = t
	}
	if o.cfg.EscalateAfter == 0 {
		o.cfg.EscalateAfter = DefaultEscalateAfter
	}
	if o.cfg.RemindBefore == 0 {
		o.cfg.RemindBefore = DefaultRemindBefore
	}
	if o.cfg.Client == nil {
		o.cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.cfg.Log == nil {
		o.cfg.Log = slog.New(slog.DiscardHandler)
	}
	if o.cfg.Link == nil {
		o.cfg.Link = func(id string) string { return "/actions/" + id }
	}
	return o, nil
}

func checkURL(flag, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: not an http(s) URL", flag, redactURL(raw))
	}
	return nil
}

// redactURL is a URL as staff may see it: scheme, host and path, without
// credentials or query.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

// slackEnabled says whether Slack is configured.
func (o *Outbox) slackEnabled() bool { return o.cfg.SlackWebhook != "" || o.cfg.SlackToken != "" }

// Enabled says whether anyone is to be reached.
func (o *Outbox) Enabled() bool {
	return len(o.cfg.Webhooks) > 0 || o.slackEnabled() || o.smtp != nil
}

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
		var final permanent
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

// permanent is a failure that trying again cannot mend.
type permanent struct{ error }

func (o *Outbox) send(ctx context.Context, d models.Delivery) (string, error) {
	switch d.Channel {
	case channelWebhook:
		return "", o.sendWebhook(ctx, d)
	case channelSlack:
		return o.sendSlack(ctx, d)
	case channelEmail:
		return "", o.sendEmail(ctx, d)
	}
	return "", permanent{fmt.Errorf("unknown channel %q", d.Channel)}
}

// The channels of deliveries.
const (
	channelWebhook = "webhook"
	channelSlack   = "slack"
	channelEmail   = "email"
)

// actorName is the name in an audit actor ("staff:ID (Name)"), or the
// actor as written.
func actorName(actor string) string {
	if i := strings.Index(actor, " ("); i > 0 && strings.HasSuffix(actor, ")") {
		return actor[i+2 : len(actor)-1]
	}
	return actor
}

// Attach tells the outbox where the tools in force and the queue's news are
// (core.New does, before Run): what a call asks for is said with the
// tools' phrases, and an action marked overdue reaches the queue pages.
func (o *Outbox) Attach(registry func() *tools.Registry, changed func(callID string), asksPasskey func(call *models.ToolCall) bool) {
	o.asksPasskey = asksPasskey
	if o.cfg.Tools == nil {
		o.cfg.Tools = registry
	}
	if o.cfg.Changed == nil {
		o.cfg.Changed = changed
	}
}

// Channels names what is set up, for the staff page.
func (o *Outbox) Channels() []string {
	var out []string
	if n := len(o.cfg.Webhooks); n == 1 {
		out = append(out, "a webhook")
	} else if n > 1 {
		out = append(out, fmt.Sprintf("%d webhooks", n))
	}
	if o.slackEnabled() {
		out = append(out, "Slack")
	}
	if o.smtp != nil {
		out = append(out, "email to staff")
	}
	return out
}
