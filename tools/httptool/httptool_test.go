package httptool_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

const secret = "whsec-test-0123456789"

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// backend is a business's order system, on a real port.
type backend struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	failures atomic.Int32 // answer 503 this many more times
	delay    time.Duration
}

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.requests = append(b.requests, r)
		b.bodies = append(b.bodies, string(body))
		b.mu.Unlock()
		if b.delay > 0 {
			time.Sleep(b.delay)
		}
		if b.failures.Add(-1) >= 0 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/"):
			id := strings.TrimPrefix(r.URL.Path, "/orders/")
			if id == "NOPE" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"no order NOPE"}`))
				return
			}
			_, _ = w.Write([]byte(`{"order_id":"` + id + `","total":1200,"status":"delivered","key_seen":"` + r.Header.Get("Authorization") + `"}`))
		case r.Method == http.MethodPost && r.URL.Path == "/refunds":
			_, _ = w.Write([]byte(`{"refund_id":"rf_1","idempotency_key":"` + r.Header.Get("Idempotency-Key") + `"}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"unknown endpoint"}}`))
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.requests)
}

func file(url string) string {
	return `tools:
  - name: lookup_order
    description: Look up one order
    risk: read
    idempotent: true
    input_schema: {type: object, properties: {order_id: {type: string}}, required: [order_id], additionalProperties: false}
    summary: "Order {order_id}"
    http: {method: GET, url: "` + url + `/orders/{order_id}", timeout: 2s, headers: {Authorization: "Bearer ${SHOP_API_KEY}"}}
  - name: refund_order
    risk: high_write
    input_schema:
      type: object
      properties: {order_id: {type: string}, amount: {type: number, exclusiveMinimum: 0}}
      required: [order_id, amount]
      additionalProperties: false
    amount: amount
    http: {method: POST, url: "` + url + `/refunds", secret: "${SHOP_SIGNING_SECRET}", timeout: 2s}
    review: [{tool: lookup_order, label: Order, args: {order_id: "{order_id}"}}]
  - name: escalate_to_human
    risk: low_write
    input_schema: {type: object, properties: {why: {type: string}}, additionalProperties: false}
`
}

func load(t *testing.T, url string, o httptool.Options) *httptool.Set {
	t.Helper()
	o.Env = env(map[string]string{"SHOP_API_KEY": "key-abc-123", "SHOP_SIGNING_SECRET": secret})
	set, err := httptool.Load([]byte(file(url)), "tools.yaml", o)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func run(t *testing.T, set *httptool.Set, name, args string) (any, error) {
	t.Helper()
	for _, tool := range set.Tools() {
		if tool.Name == name {
			n, err := tool.Normalize([]byte(args))
			if err != nil {
				t.Fatalf("%s %s: %v", name, args, err)
			}
			return tool.Run(context.Background(), tools.Call{ID: "call_1", IdempotencyKey: "cs_call_1"}, n)
		}
	}
	t.Fatalf("no tool %s", name)
	return nil, nil
}

func TestReadCallsTheBackendAndReturnsItsJSON(t *testing.T) {
	b := newBackend(t)
	set := load(t, b.URL, httptool.Options{})
	out, err := run(t, set, "lookup_order", `{"order_id":"A 1/2"}`)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(out)
	if !strings.Contains(string(raw), `"order_id":"A 1/2"`) || !strings.Contains(string(raw), `"status":"delivered"`) {
		t.Fatalf("result %s", raw)
	}
	if got := b.requests[0].URL.EscapedPath(); got != "/orders/A%201%2F2" {
		t.Fatalf("path %s: the argument must be escaped into one segment", got)
	}
	if b.requests[0].Header.Get("Authorization") != "Bearer key-abc-123" || b.requests[0].Header.Get("Idempotency-Key") != "cs_call_1" ||
		b.requests[0].Header.Get("X-Countersign-Call") != "call_1" {
		t.Fatalf("headers %v", b.requests[0].Header)
	}
	// The key came back in the body: a result never shows a secret.
	if strings.Contains(string(raw), "key-abc-123") || !strings.Contains(string(raw), "[secret]") {
		t.Fatalf("secret in the result: %s", raw)
	}
}

func TestWriteIsSignedWithTheSecret(t *testing.T) {
	b := newBackend(t)
	set := load(t, b.URL, httptool.Options{})
	if _, err := run(t, set, "refund_order", `{"order_id":"A1","amount":900}`); err != nil {
		t.Fatal(err)
	}
	r, body := b.requests[0], b.bodies[0]
	if body != `{"amount":900,"order_id":"A1"}` {
		t.Fatalf("body %s: the normalized arguments", body)
	}
	sig := r.Header.Get("X-Countersign-Signature")
	ts, v1, ok := strings.Cut(strings.TrimPrefix(sig, "t="), ",v1=")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + body))
	if !ok || !hmac.Equal([]byte(v1), []byte(hex.EncodeToString(mac.Sum(nil)))) {
		t.Fatalf("signature %q does not verify", sig)
	}
}

func TestBackendAnswersBecomeOutcomes(t *testing.T) {
	b := newBackend(t)
	set := load(t, b.URL, httptool.Options{Backoff: time.Millisecond})

	_, err := run(t, set, "lookup_order", `{"order_id":"NOPE"}`)
	var refusal *tools.RefusalError
	if !errors.As(err, &refusal) || refusal.Message != "no order NOPE" {
		t.Fatalf("4xx: %v", err)
	}

	// A non-idempotent write that fails after it was sent: nobody knows.
	b.failures.Store(1)
	n := b.count()
	_, err = run(t, set, "refund_order", `{"order_id":"A1","amount":5}`)
	var unknown *tools.UnknownError
	if !errors.As(err, &unknown) || b.count()-n != 1 {
		t.Fatalf("5xx on a write: %v after %d requests", err, b.count()-n)
	}

	// An idempotent read is tried again.
	b.failures.Store(2)
	n = b.count()
	if _, err := run(t, set, "lookup_order", `{"order_id":"A2"}`); err != nil || b.count()-n != 3 {
		t.Fatalf("5xx twice on a read: %v after %d requests", err, b.count()-n)
	}
	b.failures.Store(10)
	n = b.count()
	if _, err := run(t, set, "lookup_order", `{"order_id":"A2"}`); !errors.As(err, &unknown) || b.count()-n != 3 {
		t.Fatalf("5xx every time: %v after %d requests", err, b.count()-n)
	}
	b.failures.Store(0)
}

func TestUnreachableBackendDidNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	set := load(t, "http://"+addr, httptool.Options{})
	_, err = run(t, set, "refund_order", `{"order_id":"A1","amount":5}`)
	var refusal *tools.RefusalError
	if !errors.As(err, &refusal) || !strings.Contains(refusal.Message, "could not be reached") {
		t.Fatalf("%v", err)
	}
}

func TestTimeoutNeverShowsTheURLsSecret(t *testing.T) {
	b := newBackend(t)
	b.delay = 300 * time.Millisecond
	src := strings.Replace(file(b.URL), `/orders/{order_id}", timeout: 2s`, `/orders/{order_id}?key=${SHOP_API_KEY}", timeout: 50ms`, 1)
	set, err := httptool.Load([]byte(src), "tools.yaml", httptool.Options{Retries: 1, Backoff: time.Millisecond,
		Env: env(map[string]string{"SHOP_API_KEY": "key-abc-123", "SHOP_SIGNING_SECRET": secret})})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, set, "lookup_order", `{"order_id":"A1"}`)
	var unknown *tools.UnknownError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "timed out") || strings.Contains(err.Error(), "key-abc-123") {
		t.Fatalf("%v", err)
	}
}

func TestReviewShowsTheLookupAndSurvivesItsFailure(t *testing.T) {
	b := newBackend(t)
	set := load(t, b.URL, httptool.Options{Backoff: time.Millisecond})
	refund := set.Tools()[1]
	facts, err := refund.ReviewContext(context.Background(), tools.Call{ID: "call_9"}, `{"amount":900,"order_id":"B7"}`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range facts {
		got[f.Label] = f.Value
	}
	if got["Order: status"] != "delivered" || got["Order: total"] != "1200" || got["Order: order id"] != "B7" {
		t.Fatalf("facts %v", facts)
	}
	facts, err = refund.ReviewContext(context.Background(), tools.Call{ID: "call_9"}, `{"amount":900,"order_id":"NOPE"}`)
	if err != nil || len(facts) != 1 || !strings.Contains(facts[0].Value, "could not be looked up: no order NOPE") {
		t.Fatalf("failed lookup: %v %v", facts, err)
	}
}

// A review's key facts, named in the file, are shown beside the decision
// ("What it comes to"), money as money, and not again among the others; a
// key fact with no field or an unknown format is refused with its place.
func TestReviewKeyFactsAreWhatTheDecisionTurnsOn(t *testing.T) {
	b := newBackend(t)
	src := strings.Replace(file(b.URL), `review: [{tool: lookup_order, label: Order, args: {order_id: "{order_id}"}}]`,
		`review: [{tool: lookup_order, label: Order, args: {order_id: "{order_id}"}, key: [{field: total, format: money}, {field: status, label: Shipping}, {field: absent}]}]`, 1)
	set, err := httptool.Load([]byte(src), "tools.yaml", httptool.Options{Backoff: time.Millisecond,
		Env: env(map[string]string{"SHOP_API_KEY": "k", "SHOP_SIGNING_SECRET": secret})})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := set.Tools()[1].ReviewContext(context.Background(), tools.Call{ID: "call_9"}, `{"amount":900,"order_id":"B7"}`)
	if err != nil {
		t.Fatal(err)
	}
	var key, rest []string
	for _, f := range facts {
		if f.Key {
			key = append(key, f.Label+"="+f.Value)
		} else {
			rest = append(rest, f.Label+"="+f.Value)
		}
	}
	if strings.Join(key, ";") != "Total=$1,200.00;Shipping=delivered" || slices.ContainsFunc(rest, func(s string) bool { return strings.HasPrefix(s, "Order: total") }) ||
		!slices.Contains(rest, "Order: order id=B7") {
		t.Fatalf("key facts %q, the others %q", key, rest)
	}
	for _, bad := range []string{`key: [{label: Total}]`, `key: [{field: total, format: euros}]`} {
		src := strings.Replace(file(b.URL), `args: {order_id: "{order_id}"}}]`, `args: {order_id: "{order_id}"}, `+bad+`}]`, 1)
		if _, err := httptool.Load([]byte(src), "tools.yaml", httptool.Options{Env: env(map[string]string{"SHOP_API_KEY": "k", "SHOP_SIGNING_SECRET": secret})}); err == nil ||
			!strings.Contains(err.Error(), "line 18: a key fact names a field") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestDecisionOnlyToolHasNoExecutor(t *testing.T) {
	set := load(t, "http://127.0.0.1:1", httptool.Options{})
	if set.Tools()[2].Executes() || !set.Tools()[0].Executes() {
		t.Fatal("escalate_to_human has no http; lookup_order has")
	}
}

func TestBadFilesAreRefusedWithTheLine(t *testing.T) {
	base := file("https://shop.example")
	vars := env(map[string]string{"SHOP_API_KEY": "k", "SHOP_SIGNING_SECRET": "s"})
	for _, tc := range []struct {
		name, src, want string
		env             func(string) (string, bool)
	}{
		{"unknown key", strings.Replace(base, "    risk: read\n", "    risk: read\n    colour: red\n", 1), "[5:5] unknown field \"colour\"", vars},
		{"missing variable", base, "SHOP_API_KEY is not set", env(nil)},
		{"name used twice", strings.Replace(base, "name: escalate_to_human", "name: lookup_order", 1), "line 19: the name \"lookup_order\" is used by an earlier tool", vars},
		{"bad risk", strings.Replace(base, "risk: low_write", "risk: medium", 1), "risk \"medium\"", vars},
		{"bad schema", strings.Replace(base, "{why: {type: string}}", "{why: {type: strung}}", 1), "schema", vars},
		{"placeholder of nothing", strings.Replace(base, "/orders/{order_id}", "/orders/{id}", 1), "line 8: {id} is not one of the input's properties", vars},
		{"review of a write", strings.Replace(base, "review: [{tool: lookup_order", "review: [{tool: escalate_to_human", 1), "not a tool defined above it", vars},
		{"secret in the file", strings.Replace(base, `secret: "${SHOP_SIGNING_SECRET}"`, `secret: "plain"`, 1), "write the secret as ${NAME}", vars},
		{"bad timeout", strings.Replace(base, "timeout: 2s", "timeout: soon", 1), "timeout \"soon\"", vars},
		{"own header", strings.Replace(base, "headers: {Authorization:", "headers: {Idempotency-Key: x, Authorization:", 1), "Countersign's own", vars},
		{"no tools", "tools: []\n", "no tools", vars},
	} {
		_, err := httptool.Load([]byte(tc.src), "tools.yaml", httptool.Options{Env: tc.env})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tools.yaml") {
			t.Errorf("%s: %v (want %q)", tc.name, err, tc.want)
		}
	}
}
