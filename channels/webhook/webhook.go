// Package webhook is the channel that tells the business's own systems:
// every event, or the types it names, as signed JSON posted to each URL.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/tools/httptool"
)

// Config is where events go and how they are signed.
type Config struct {
	// URLs receive the events (--webhook), signed with Secret
	// (--webhook-secret); Events names the types they hear (empty:
	// every type, outbox.EventTypes).
	URLs   []string
	Secret string
	Events []string
	// Client sends them (nil: a client with a 10 s timeout).
	Client *http.Client
}

// Channel posts events to the webhooks.
type Channel struct {
	cfg Config
}

// New checks the configuration: nil, nil when no URL is given.
func New(cfg Config) (*Channel, error) {
	if len(cfg.URLs) == 0 {
		return nil, nil
	}
	for _, u := range cfg.URLs {
		if err := outbox.CheckURL("--webhook", u); err != nil {
			return nil, err
		}
	}
	if cfg.Secret == "" {
		return nil, errors.New("--webhook needs --webhook-secret: receivers must be able to check that an event came from here")
	}
	for _, t := range cfg.Events {
		if !slices.Contains(outbox.EventTypes, outbox.EventType(t)) {
			return nil, fmt.Errorf("--webhook-events: there is no event type %q; the types are: %s", t, outbox.TypeNames(", "))
		}
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &Channel{cfg: cfg}, nil
}

// Name is the deliveries' channel.
func (c *Channel) Name() string { return "webhook" }

// Describe says how many webhooks there are.
func (c *Channel) Describe() string {
	if n := len(c.cfg.URLs); n > 1 {
		return fmt.Sprintf("%d webhooks", n)
	}
	return "a webhook"
}

// Hears says whether the webhooks receive events of a kind: the event
// types they were given (a step toward a decision, an action's view or
// end are for people: webhooks hear the decision and every call's end).
func (c *Channel) Hears(kind outbox.EventType) bool {
	if !slices.Contains(outbox.EventTypes, kind) {
		return false
	}
	return len(c.cfg.Events) == 0 || slices.Contains(c.cfg.Events, string(kind))
}

// Queue queues the event for every webhook.
func (c *Channel) Queue(tx *storage.Tx, n outbox.Notice) error {
	ev := n.Event()
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	for _, u := range c.cfg.URLs {
		if err := tx.Enqueue(&models.Delivery{Channel: c.Name(), Target: outbox.RedactURL(u), Event: string(ev.Type),
			Subject: n.Subject(), Body: string(body)}); err != nil {
			return err
		}
	}
	return nil
}

// Send posts an event, signed as HTTP tools' calls are
// (X-Countersign-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">),
// so a receiver checks both with one function. Any answer but 2xx is a
// failure tried again; 410 Gone says the receiver wants no more.
func (c *Channel) Send(ctx context.Context, d models.Delivery) (string, error) {
	target := ""
	for _, u := range c.cfg.URLs {
		if outbox.RedactURL(u) == d.Target {
			target = u
			break
		}
	}
	if target == "" {
		return "", outbox.Permanent{Err: fmt.Errorf("the webhook %s is no longer configured", d.Target)}
	}
	body := []byte(d.Body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return "", outbox.Permanent{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Countersign-Webhook")
	req.Header.Set("X-Countersign-Event", d.Event)
	req.Header.Set("X-Countersign-Delivery", strconv.FormatInt(d.ID, 10))
	req.Header.Set("X-Countersign-Signature", httptool.Sign([]byte(c.cfg.Secret), time.Now(), body))
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s did not answer: %s", d.Target, unwrapURLError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return "", nil
	}
	err = fmt.Errorf("%s answered %d %s", d.Target, resp.StatusCode, strings.TrimSpace(string(answer)))
	if resp.StatusCode == http.StatusGone {
		return "", outbox.Permanent{Err: err}
	}
	return "", err
}

// unwrapURLError drops the URL (which may hold a secret) from a client error.
func unwrapURLError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i >= 0 {
		return msg[i+3:]
	}
	return msg
}
