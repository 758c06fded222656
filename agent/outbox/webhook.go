package outbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools/httptool"
)

// sendWebhook posts an event, signed as HTTP tools' calls are
// (X-Countersign-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">),
// so a receiver checks both with one function. Any answer but 2xx is a
// failure tried again; 410 Gone says the receiver wants no more.
func (o *Outbox) sendWebhook(ctx context.Context, d models.Delivery) error {
	target := ""
	for _, u := range o.cfg.Webhooks {
		if redactURL(u) == d.Target {
			target = u
			break
		}
	}
	if target == "" {
		return permanent{fmt.Errorf("the webhook %s is no longer configured", d.Target)}
	}
	body := []byte(d.Body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return permanent{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Countersign-Webhook")
	req.Header.Set("X-Countersign-Event", d.Event)
	req.Header.Set("X-Countersign-Delivery", strconv.FormatInt(d.ID, 10))
	req.Header.Set("X-Countersign-Signature", httptool.Sign([]byte(o.cfg.WebhookSecret), time.Now(), body))
	resp, err := o.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%s did not answer: %s", d.Target, unwrapURLError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("%s answered %d %s", d.Target, resp.StatusCode, strings.TrimSpace(string(answer)))
	if resp.StatusCode == http.StatusGone {
		return permanent{err}
	}
	return err
}

// unwrapURLError drops the URL (which may hold a secret) from a client error.
func unwrapURLError(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "\": "); i >= 0 {
		return msg[i+3:]
	}
	return msg
}
