package slack

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models/storage"
)

// Config is how Countersign posts to Slack and takes its clicks.
type Config struct {
	// Webhook (an incoming webhook's URL, --slack-webhook) posts
	// messages; with Token and Channel (--slack-token, --slack-channel)
	// they are posted through Slack's Web API instead, which can also
	// update them when the action is decided. APIURL is another Slack
	// (tests; "" is Slack's own).
	Webhook        string
	Token, Channel string
	APIURL         string
	// SigningSecret (--slack-signing-secret) turns on the inbound route
	// that takes the buttons' clicks.
	SigningSecret string
	// Store keeps the posted messages' refs, and the accounts people's
	// Slack users are linked to.
	Store *storage.Store
	// Client reaches Slack (nil: a client with a 10 s timeout); Log says
	// what went wrong answering a click.
	Client *http.Client
	Log    *slog.Logger
}

// Channel is Slack.
type Channel struct {
	cfg    Config
	clicks chan click // Slack's clicks, for the workers (Jobs)
}

// New checks the configuration: nil, nil when Slack is not set up.
func New(cfg Config) (*Channel, error) {
	if cfg.Webhook == "" && cfg.Token == "" && cfg.Channel == "" {
		if cfg.SigningSecret != "" {
			return nil, errors.New("--slack-signing-secret needs --slack-webhook or --slack-token: the buttons are on the messages they post")
		}
		return nil, nil
	}
	if cfg.Webhook != "" {
		if err := outbox.CheckURL("--slack-webhook", cfg.Webhook); err != nil {
			return nil, err
		}
	}
	if (cfg.Token == "") != (cfg.Channel == "") {
		return nil, errors.New("--slack-token and --slack-channel go together")
	}
	if cfg.Store == nil {
		return nil, errors.New("slack: no store")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Channel{cfg: cfg, clicks: make(chan click, clickQueue)}, nil
}

// Name is the deliveries' channel.
func (c *Channel) Name() string { return "slack" }

// Describe says Slack is set up.
func (c *Channel) Describe() string { return "Slack" }

// Hears says what Slack is told: actions, as they wait, step on and end.
func (c *Channel) Hears(kind outbox.EventType) bool {
	switch kind {
	case outbox.TypeActionPending, outbox.NoticeApprovalAdded, outbox.TypeActionDecided, outbox.NoticeActionEnded,
		outbox.TypeActionOverdue, outbox.TypeActionReminder:
		return true
	}
	return false
}
