package httptool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/cenkalti/backoff/v5"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/tools"
)

// MaxResultBytes caps the answer of a backend that is kept as a call's result.
const MaxResultBytes = 1 << 20

// executor calls one tool's backend.
type executor struct {
	tool       string
	method     string
	url        *urlTemplate // ${NAME} filled; {field} filled per call
	timeout    time.Duration
	headers    map[string]string
	secret     []byte
	idempotent bool
	client     *http.Client
	retries    int
	backoff    time.Duration
	redact     func(string) string
	secrets    *redactor
}

func (set *Set) executor(ts toolSpec, props map[string]any, o Options, at func(string) string) (*executor, error) {
	h := ts.HTTP
	ex := &executor{tool: ts.Name, method: strings.ToUpper(h.Method), idempotent: ts.Idempotent, client: noRedirectClient(o.Client),
		retries: o.Retries, backoff: o.Backoff, redact: set.Redact, secrets: &set.secrets, headers: map[string]string{}}
	if ex.method == "" {
		ex.method = http.MethodPost
	}
	if !validMethod[ex.method] {
		return nil, fmt.Errorf("%s: method %q is not GET, POST, PUT, PATCH or DELETE", at("http.method"), h.Method)
	}
	if err := checkPlaceholders(h.URL, props); err != nil {
		return nil, fmt.Errorf("%s: %v", at("http.url"), err)
	}
	filled, err := set.env(h.URL, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", at("http.url"), err)
	}
	if ex.url, err = parseURLTemplate(filled); err != nil {
		return nil, fmt.Errorf("%s: %v", at("http.url"), err)
	}
	ex.timeout = 10 * time.Second
	if h.Timeout != "" {
		d, err := time.ParseDuration(h.Timeout)
		if err != nil || d <= 0 || d > 5*time.Minute {
			return nil, fmt.Errorf("%s: timeout %q is not a duration between 0 and 5m (like 5s)", at("http.timeout"), h.Timeout)
		}
		ex.timeout = d
	}
	for k, v := range h.Headers {
		if strings.EqualFold(k, "Idempotency-Key") || strings.HasPrefix(strings.ToLower(k), "x-countersign-") {
			return nil, fmt.Errorf("%s: the header %s is Countersign's own", at("http.headers"), k)
		}
		if ex.headers[k], err = set.env(v, o); err != nil {
			return nil, fmt.Errorf("%s: %v", at("http.headers"), err)
		}
	}
	if h.Secret != "" {
		s, err := set.env(h.Secret, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at("http.secret"), err)
		}
		if s == h.Secret {
			return nil, fmt.Errorf("%s: write the secret as ${NAME}, from the environment, never in the file", at("http.secret"))
		}
		ex.secret = []byte(s)
	}
	return ex, nil
}

// Sign is the value of X-Countersign-Signature for a body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">".
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// fill puts the call's arguments into a template: {field} becomes the
// argument as text, escaped with escape.
func fill(tpl string, args map[string]any, escape func(string) string) string {
	return argRef.ReplaceAllStringFunc(tpl, func(ref string) string {
		v, ok := args[argRef.FindStringSubmatch(ref)[1]]
		if !ok || v == nil {
			return ""
		}
		return escape(text(v))
	})
}

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// check refuses, before anyone decides, a call whose arguments would make a
// URL Countersign never sends.
func (e *executor) check(_ context.Context, _ tools.Call, args map[string]any) error {
	if _, err := e.url.fill(args); err != nil {
		return tools.Refuse("%s", err)
	}
	return nil
}

// run calls the backend once, or again after a 5xx or a timeout when the
// tool is idempotent. Its answers become the call's outcome: 2xx succeeded
// (the JSON body is the result), 4xx failed (the body's message goes to the
// model), and a 5xx or timeout that is not tried again leaves the outcome
// unknown, for a person to reconcile.
func (e *executor) run(ctx context.Context, call tools.Call, args map[string]any) (any, error) {
	target, err := e.url.fill(args)
	if err != nil {
		return nil, tools.Refuse("%s; nothing was sent", err)
	}
	var body []byte
	if e.method == http.MethodPost || e.method == http.MethodPut || e.method == http.MethodPatch {
		if body, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("encode arguments: %w", err)
		}
	}
	tries := 1
	if e.idempotent {
		tries += e.retries
	}
	// A retry waits the backoff, then twice as long after each failed try.
	var (
		settled       bool
		result        any
		outcome, last error
	)
	backoff.Retry(ctx, func() (struct{}, error) {
		r, retry, err := e.once(ctx, call, target, body)
		if !retry {
			settled, result, outcome = true, r, err
			return struct{}{}, nil
		}
		last = err
		return struct{}{}, cmp.Or(err, errNoAnswer)
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: e.backoff, Multiplier: 2, MaxInterval: time.Hour}),
		backoff.WithMaxTries(uint(tries)), backoff.WithMaxElapsedTime(0))
	switch {
	case settled:
		return result, outcome
	case ctx.Err() != nil:
		return nil, e.unknown("it was stopped while trying again", last)
	}
	return nil, e.unknown(fmt.Sprintf("no answer after %d tries", tries), last)
}

var errNoAnswer = errors.New("no answer")

// once sends one request. retry says the answer leaves the outcome open
// (5xx, timeout, a connection lost after sending).
func (e *executor) once(ctx context.Context, call tools.Call, target string, body []byte) (any, bool, error) {
	rctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, e.method, target, bytes.NewReader(body))
	if err != nil {
		return nil, false, errors.New(e.redact(err.Error()))
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if call.IdempotencyKey != "" { // a review's read-only lookup carries none
		req.Header.Set("Idempotency-Key", call.IdempotencyKey)
	}
	req.Header.Set("X-Countersign-Call", call.ID)
	// With tracing on, the backend continues the call's trace (W3C
	// traceparent); off, the propagator writes nothing.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	if e.secret != nil {
		req.Header.Set("X-Countersign-Signature", Sign(e.secret, time.Now(), body))
	}
	resp, err := e.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// Never sent: it did not happen, whatever the tool.
			return nil, false, tools.Refuse("the %s service could not be reached; nothing was done", e.tool)
		}
		return nil, true, errors.New(e.redact(describe(err)))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drain for reuse
		return nil, false, e.redirected(resp)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
		if err != nil {
			return nil, true, errors.New(e.redact(describe(err)))
		}
		return e.result(raw), false, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, false, tools.Refuse("%s", e.redact(message(raw, resp.Status)))
	default:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // drain for reuse
		return nil, true, fmt.Errorf("the backend answered %s", resp.Status)
	}
}

// result is a 2xx body as the call's result: its JSON, else its text.
func (e *executor) result(raw []byte) any {
	if len(raw) > MaxResultBytes {
		return map[string]any{"note": fmt.Sprintf("the backend's answer was over %d bytes and was not kept", MaxResultBytes)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{"ok": true}
	}
	if json.Valid(raw) {
		return json.RawMessage(e.secrets.json(raw))
	}
	return map[string]any{"text": tools.Truncate(e.redact(string(raw)), 4000)}
}

// unknown leaves the call for a person: the backend may or may not have
// acted.
func (e *executor) unknown(why string, last error) error {
	detail := why
	if last != nil {
		detail += ": " + last.Error()
	}
	return &tools.UnknownError{Message: "the " + e.tool + " service did not confirm it (" + detail + "); a team member will check what happened"}
}

// message is what a refusal says: the body's "error" or "message" (as a
// string or an object with a message), else its text, else the status.
func message(raw []byte, status string) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"error", "message", "detail"} {
			switch v := m[k].(type) {
			case string:
				if v != "" {
					return tools.Truncate(v, 500)
				}
			case map[string]any:
				if s, ok := v["message"].(string); ok && s != "" {
					return tools.Truncate(s, 500)
				}
			}
		}
	}
	if t := strings.TrimSpace(string(raw)); t != "" && !strings.HasPrefix(t, "<") {
		return tools.Truncate(t, 500)
	}
	return "the backend refused it (" + status + ")"
}

// describe is an error of the transport without the URL (which may hold a
// secret): what went wrong, in a few words.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "it timed out"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "it timed out"
	}
	return err.Error()
}

// lookup is one read-only tool an approver sees the answer of.
type lookup struct {
	tool  *tools.Tool
	label string
	args  map[string]string
	key   []keySpec
}

// reviewer runs the lookups when an approver opens the action. A lookup
// that fails says so and blocks nothing. Lookups are reads (the tools
// file allows no other), so they carry no Idempotency-Key: a backend that
// deduplicates by key answers each view afresh.
func reviewer(lookups []lookup, redact func(string) string) func(ctx context.Context, call tools.Call, args map[string]any) ([]tools.Fact, error) {
	return func(ctx context.Context, call tools.Call, args map[string]any) ([]tools.Fact, error) {
		var facts []tools.Fact
		for _, l := range lookups {
			la := map[string]any{}
			for k, tpl := range l.args {
				la[k] = fill(tpl, args, func(s string) string { return s })
			}
			raw, _ := json.Marshal(la)
			norm, err := l.tool.Normalize(raw)
			var out any
			if err == nil {
				out, err = l.tool.Run(ctx, tools.Call{ID: call.ID + "/review",
					RunID: call.RunID, CustomerID: call.CustomerID, CustomerName: call.CustomerName}, norm)
			}
			if err != nil {
				var refusal *tools.RefusalError
				msg := "the lookup failed"
				if errors.As(err, &refusal) {
					msg = refusal.Message
				}
				facts = append(facts, tools.Fact{Label: l.label, Value: "could not be looked up: " + redact(msg)})
				continue
			}
			facts = append(facts, keyFacts(l.key, out)...)
			facts = append(facts, flatten(l.label, out, l.key)...)
		}
		return facts, nil
	}
}

// keyFacts are the fields of a lookup's answer the decision turns on, as
// the tools file names them; a field the answer lacks is left out.
func keyFacts(keys []keySpec, out any) []tools.Fact {
	if len(keys) == 0 {
		return nil
	}
	b, _ := json.Marshal(out)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	var facts []tools.Fact
	for _, k := range keys {
		v, ok := m[k.Field]
		if !ok || v == nil {
			continue
		}
		label := k.Label
		if label == "" {
			label = strings.ReplaceAll(k.Field, "_", " ")
			label = strings.ToUpper(label[:1]) + label[1:]
		}
		value := tools.Truncate(text(v), 300)
		if f, isNum := v.(float64); isNum && k.Format == "money" {
			if c, err := models.CentsFrom(f); err == nil {
				value = c.String()
			}
		}
		facts = append(facts, tools.Fact{Label: label, Value: value, Key: true})
	}
	return facts
}

// flatten shows a lookup's answer as facts: each top-level field of an
// object on its own line (but the key facts, shown already), anything else
// as one.
func flatten(label string, out any, key []keySpec) []tools.Fact {
	b, _ := json.Marshal(out)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || len(m) == 0 {
		return []tools.Fact{{Label: label, Value: tools.Truncate(string(b), 300)}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !slices.ContainsFunc(key, func(ks keySpec) bool { return ks.Field == k && m[k] != nil }) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	facts := make([]tools.Fact, 0, len(keys))
	for _, k := range keys {
		facts = append(facts, tools.Fact{Label: label + ": " + strings.ReplaceAll(k, "_", " "), Value: tools.Truncate(text(m[k]), 300)})
	}
	return facts
}
