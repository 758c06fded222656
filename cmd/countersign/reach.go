package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/channels/email"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/channels/webhook"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/views"
)

// reachConfig is how `serve` reaches people outside: webhooks, Slack,
// email, and when it escalates.
type reachConfig struct {
	PublicURL                   string
	Webhooks, WebhookEvents     listFlag
	WebhookSecret               string
	SlackWebhook, SlackSigning  string
	SlackToken, SlackChannel    string
	SlackAPIURL                 string
	SMTPURL, MailFrom           string
	EscalateAfter, RemindBefore time.Duration
}

// listFlag is a flag given once per value; from the environment, the values
// are separated by spaces.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, " ") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, strings.Fields(v)...)
	return nil
}

func (cfg *config) reachFlags(fs *flag.FlagSet) {
	r := &cfg.Reach
	fs.StringVar(&r.PublicURL, "public-url", "", "the address people open Countersign at, for links in Slack and email (default: http://<addr>)")
	fs.Var(&r.Webhooks, "webhook", "a URL that receives every event as signed JSON (repeatable; COUNTERSIGN_WEBHOOK: separated by spaces)")
	fs.Var(&r.WebhookEvents, "webhook-events", "only these event types go to the webhooks (repeatable or separated by spaces; default all: "+outbox.TypeNames(" ")+")")
	fs.StringVar(&r.WebhookSecret, "webhook-secret", "", "the secret webhook events are signed with (X-Countersign-Signature)")
	fs.StringVar(&r.SlackWebhook, "slack-webhook", "", "a Slack incoming webhook URL: each action that waits is posted there, with Approve and Reject")
	fs.StringVar(&r.SlackSigning, "slack-signing-secret", "", "the Slack app's signing secret: enables POST /integrations/slack/interactions (the buttons)")
	fs.StringVar(&r.SlackToken, "slack-token", "", "a Slack bot token (xoxb-…), with --slack-channel: post through the Web API, and update each message when the action is decided")
	fs.StringVar(&r.SlackChannel, "slack-channel", "", "the Slack channel id the bot posts in")
	fs.StringVar(&r.SlackAPIURL, "slack-api-url", "", "Slack's Web API address (tests and proxies; default Slack's own)")
	fs.StringVar(&r.SMTPURL, "smtp-url", "", "mail server for email to staff: smtp://user:password@host:587 (STARTTLS) or smtps://…:465")
	fs.StringVar(&r.MailFrom, "mail-from", "", "the address email to staff comes from")
	fs.DurationVar(&r.EscalateAfter, "escalate-after", outbox.DefaultEscalateAfter, "an action unanswered this long is marked overdue and supervisors are told (0: never)")
	fs.DurationVar(&r.RemindBefore, "remind-before", outbox.DefaultRemindBefore, "approvers are reminded this long before an action expires (0: never)")
}

// outboxConfig turns the flags into the outbox's configuration: the
// channels set up (each checks its own flags), who is reached and when.
func (cfg *config) outboxConfig(store *storage.Store, log *slog.Logger) (outbox.Config, error) {
	r := cfg.Reach
	public := strings.TrimRight(r.PublicURL, "/")
	if public == "" {
		scheme := "http"
		if cfg.TLSCert != "" {
			scheme = "https"
		}
		public = scheme + "://" + displayAddr(cfg.Addr)
	} else if u, err := url.Parse(public); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return outbox.Config{}, fmt.Errorf("--public-url %q: want http(s)://host[:port][/path]", r.PublicURL)
	}
	never := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	channels, err := cfg.channels(store, log)
	if err != nil {
		return outbox.Config{}, err
	}
	return outbox.Config{Channels: channels, EscalateAfter: never(r.EscalateAfter), RemindBefore: never(r.RemindBefore), Log: log,
		Link: func(id string) string { return public + views.Reverse(views.PathAction, id) }, Base: public}, nil
}

// channels are the ways of reaching people the flags set up, in the order
// the staff page names them.
func (cfg *config) channels(store *storage.Store, log *slog.Logger) ([]outbox.Channel, error) {
	r := cfg.Reach
	var out []outbox.Channel
	wh, err := webhook.New(webhook.Config{URLs: r.Webhooks, Secret: r.WebhookSecret, Events: r.WebhookEvents})
	if err != nil {
		return nil, err
	}
	if wh != nil {
		out = append(out, wh)
	}
	sl, err := slack.New(slack.Config{Webhook: r.SlackWebhook, Token: r.SlackToken, Channel: r.SlackChannel, APIURL: r.SlackAPIURL,
		SigningSecret: r.SlackSigning, Store: store, Log: log})
	if err != nil {
		return nil, err
	}
	if sl != nil {
		out = append(out, sl)
	}
	em, err := email.New(email.Config{SMTPURL: r.SMTPURL, From: r.MailFrom, Now: store.Now})
	if err != nil {
		return nil, err
	}
	if em != nil {
		out = append(out, em)
	}
	return out, nil
}
