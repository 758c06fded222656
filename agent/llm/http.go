package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Config configures a hosted model. The key is only ever sent to
// the provider: it never reaches the model's context or the logs.
type Config struct {
	BaseURL    string
	APIKey     string
	Model      string
	Timeout    time.Duration // per request, retries included
	MaxRetries int           // on 429 and 5xx, with backoff
	MaxTokens  int64
	HTTPClient *http.Client
}

func (c *Config) defaults(model, baseURL string) {
	if c.Model == "" {
		c.Model = model
	}
	if c.BaseURL == "" {
		c.BaseURL = baseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout == 0 {
		c.Timeout = 60 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 1024
	}
	// A provider never redirects a request that carries the key; one that
	// does is answered, not followed, so the key goes to one host only.
	client := http.Client{}
	if c.HTTPClient != nil {
		client = *c.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.HTTPClient = &client
}

// maxReply bounds what is read of a provider's answer.
const maxReply = 8 << 20

// post sends body as JSON to the provider and decodes its answer into
// out. A 408, 409, 429 or 5xx answer (Anthropic's 529 included) or a
// broken connection is tried again, MaxRetries times, with exponential
// backoff or the wait the provider asks for; everything happens within
// Timeout. Errors wrap ErrModel and never carry the key.
func (c *Config) post(ctx context.Context, provider, path string, header http.Header, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrModel, provider, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 500*time.Millisecond, 8*time.Second
	raw, err := backoff.Retry(ctx, func() ([]byte, error) {
		return c.once(ctx, c.BaseURL+path, header, payload)
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(c.MaxRetries)+1), backoff.WithMaxElapsedTime(0))
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		msg := err.Error()
		if c.APIKey != "" {
			msg = strings.ReplaceAll(msg, c.APIKey, "[key]")
		}
		return fmt.Errorf("%w: %s: %s", ErrModel, provider, msg)
	}
	return nil
}

// once makes one request. Errors worth trying again are returned as they
// are (or as a RetryAfterError); the rest are permanent.
func (c *Config) once(ctx context.Context, url string, header http.Header, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, backoff.Permanent(err)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, backoff.Permanent(ctx.Err())
		}
		return nil, err // the connection broke: try again
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxReply {
		return nil, backoff.Permanent(fmt.Errorf("the answer is over %d bytes", maxReply))
	}
	if resp.StatusCode/100 == 2 {
		return raw, nil
	}
	failure := fmt.Errorf("%s: %s", resp.Status, providerMessage(raw))
	switch s := resp.StatusCode; {
	case s == 408 || s == 409 || s == 429 || s >= 500:
		if wait, ok := retryAfter(resp.Header); ok {
			return nil, waitFor{failure, &backoff.RetryAfterError{Duration: wait}}
		}
		return nil, failure
	}
	return nil, backoff.Permanent(failure)
}

// waitFor is a failure that says how long to wait before trying again.
type waitFor struct {
	error
	wait *backoff.RetryAfterError
}

func (w waitFor) Unwrap() error { return w.wait }

// retryAfter reads the wait a provider asks for: OpenAI's Retry-After-Ms,
// or the standard Retry-After in seconds; at most a minute.
func retryAfter(h http.Header) (time.Duration, bool) {
	var d time.Duration
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 {
		d = time.Duration(s) * time.Second
	} else {
		return 0, false
	}
	return min(d, time.Minute), true
}

// providerMessage is the message of an error answer, as both providers
// write it ({"error":{"message":…}}), or the start of the body.
func providerMessage(raw []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}
