package gate_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
	"github.com/countersign/countersign/tools/httptool"
)

// refundBackend is a business's refund service on a real port: it checks
// each request's signature and remembers what it was sent.
type refundBackend struct {
	*httptest.Server
	mu      sync.Mutex
	keys    []string
	bodies  []string
	badSigs int
	release chan struct{} // when set, answers wait for it
	arrived chan struct{} // when set, told of each request as it arrives
}

func newRefundBackend(t *testing.T, secret string) *refundBackend {
	b := &refundBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, v1, _ := strings.Cut(strings.TrimPrefix(r.Header.Get("X-Countersign-Signature"), "t="), ",v1=")
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		b.mu.Lock()
		if !hmac.Equal([]byte(v1), []byte(hex.EncodeToString(mac.Sum(nil)))) {
			b.badSigs++
		}
		b.keys = append(b.keys, r.Header.Get("Idempotency-Key"))
		b.bodies = append(b.bodies, string(body))
		release, arrived := b.release, b.arrived
		b.mu.Unlock()
		if arrived != nil {
			arrived <- struct{}{}
		}
		if release != nil {
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"refund_id":"rf_77","status":"sent"}`))
	}))
	t.Cleanup(b.Close)
	return b
}

func httpGate(t *testing.T, url, secret string, wait time.Duration) (*gate.Gate, *storage.Store, string) {
	t.Helper()
	set, err := httptool.Load([]byte(`tools:
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "`+url+`/refunds", secret: "${SIGNING}", timeout: 5s}
`), "tools.yaml", httptool.Options{Env: func(string) (string, bool) { return secret, true }})
	if err != nil {
		t.Fatal(err)
	}
	store := storetest.Open(t)
	reg, _ := tools.NewRegistry(set.Tools()...)
	pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol, ExecutionWait: wait})
	t.Cleanup(g.Close)
	runID := models.NewID("run")
	if err := store.Write(context.Background(), func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_9", CustomerName: "Nine", Channel: "test", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	return g, store, runID
}

// A high-risk HTTP tool waits for a person, then is sent exactly once,
// signed, with the call's idempotency key, even when two approvals race.
func TestHTTPToolRunsOnceAfterApproval(t *testing.T) {
	const secret = "sig-secret-42"
	b := newRefundBackend(t, secret)
	g, store, runID := httpGate(t, b.URL, secret, 0)
	ctx := context.Background()
	out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_9", Tool: "refund_order", Args: []byte(`{"order_id":"O1","amount":900}`)})
	if err != nil || out.Status != models.CallPending {
		t.Fatalf("%+v %v", out, err)
	}
	if len(b.bodies) != 0 {
		t.Fatal("a pending call reached the backend")
	}
	var wg sync.WaitGroup
	for _, who := range []models.Actor{approver1, supervisor} {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = g.Approve(ctx, out.CallID, who, gate.ApproveRequest{}) }()
	}
	wg.Wait()
	call, _ := store.ToolCall(ctx, out.CallID)
	if call.Status != models.CallSucceeded || !strings.Contains(call.Result, "rf_77") {
		t.Fatalf("call %s %s %s", call.Status, call.Result, call.Error)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bodies) != 1 || b.keys[0] != call.IdempotencyKey || b.badSigs != 0 || b.bodies[0] != `{"amount":900,"order_id":"O1"}` {
		t.Fatalf("backend saw %d requests, keys %v, %d bad signatures, bodies %v", len(b.bodies), b.keys, b.badSigs, b.bodies)
	}
}

// The approver's request ends (the tab is closed) while a slow backend
// works: the call still finishes and records what the backend said.
func TestApproverLeavingDoesNotCutTheCall(t *testing.T) {
	const secret = "sig-secret-43"
	b := newRefundBackend(t, secret)
	b.release, b.arrived = make(chan struct{}), make(chan struct{}, 1)
	var released sync.Once
	release := func() { released.Do(func() { close(b.release) }) }
	t.Cleanup(release) // before the backend closes: a failed test must not leave its answer hanging
	g, store, runID := httpGate(t, b.URL, secret, 50*time.Millisecond)
	out, err := g.Call(context.Background(), gate.CallRequest{RunID: runID, CustomerID: "cus_9", Tool: "refund_order", Args: []byte(`{"order_id":"O2","amount":700}`)})
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, closeTab := context.WithCancel(context.Background())
	go func() { <-b.arrived; closeTab() }() // the tab closes while the backend works
	res, err := g.Approve(reqCtx, out.CallID, approver1, gate.ApproveRequest{})
	if err != nil || !res.Final || res.Outcome != nil {
		t.Fatalf("approve: %+v %v (the outcome is not known yet)", res, err)
	}
	// Approved and about to run, or running: not cut, not finished.
	if call, _ := store.ToolCall(context.Background(), out.CallID); call.Status != models.CallExecuting && call.Status != models.CallApproved {
		t.Fatalf("while the backend works: %s", call.Status)
	}
	release()
	deadline := time.Now().Add(5 * time.Second)
	for {
		call, _ := store.ToolCall(context.Background(), out.CallID)
		if call.Status == models.CallSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call ended %s (%s)", call.Status, call.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A backend that fails after the request was sent leaves a write nobody
// may send again blindly: the call is unknown, for a supervisor, who
// records what really happened.
func TestHTTPToolFailureAfterSendingIsUnknown(t *testing.T) {
	var hits sync.WaitGroup
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer hits.Done()
		http.Error(w, "upstream broke", http.StatusBadGateway)
	}))
	defer backend.Close()
	hits.Add(1) // exactly one request: the tool is not idempotent
	g, store, runID := httpGate(t, backend.URL, "s3cret-value", 0)
	ctx := context.Background()
	out, _ := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_9", Tool: "refund_order", Args: []byte(`{"order_id":"O3","amount":600}`)})
	if _, err := g.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{}); err != nil {
		t.Fatal(err)
	}
	hits.Wait()
	call, _ := store.ToolCall(ctx, out.CallID)
	if call.Status != models.CallUnknown || !strings.Contains(call.Error, "did not confirm it") {
		t.Fatalf("after a 502: %s %q", call.Status, call.Error)
	}
	if err := g.Reconcile(ctx, out.CallID, supervisor, false, "checked the payments system: no refund went out"); err != nil {
		t.Fatal(err)
	}
	if call, _ := store.ToolCall(ctx, out.CallID); call.Status != models.CallFailed {
		t.Fatalf("after reconciling: %s", call.Status)
	}
}

// Where and how an HTTP tool sends a call is part of what its approvers
// approved: the tools file changed between the first and the second of two
// approvals (its URL to another host, its method, a header added) and the
// call ends invalidated, and neither backend is sent anything. Only the
// values of secrets stay out of the digest.
func TestAnHTTPToolSentElsewhereThanApprovedDoesNotRun(t *testing.T) {
	const file = `tools:
  - name: refund_order
    risk: high_write
    input_schema: {type: object, properties: {order_id: {type: string}, amount: {type: number}}, required: [order_id, amount], additionalProperties: false}
    http: {method: POST, url: "%s/refunds", headers: {Authorization: "Bearer ${TOKEN}"}, timeout: 5s}
`
	load := func(t *testing.T, yaml, token string) *tools.Registry {
		set, err := httptool.Load([]byte(yaml), "tools.yaml", httptool.Options{Env: func(string) (string, bool) { return token, true }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(set.Close)
		reg, _ := tools.NewRegistry(set.Tools()...)
		return reg
	}
	hash := func(reg *tools.Registry) string { tool, _ := reg.Get("refund_order"); return tool.DefinitionHash() }
	shop, elsewhere := newRefundBackend(t, ""), newRefundBackend(t, "")
	first := strings.Replace(file, "%s", shop.URL, 1)
	if hash(load(t, first, "one")) != hash(load(t, first, "another")) {
		t.Fatal("a secret's value changed the tool's digest: it would be in what approvals record")
	}
	for name, changed := range map[string]string{
		"its URL":    strings.Replace(file, "%s", elsewhere.URL, 1),
		"its method": strings.Replace(first, "method: POST", "method: PUT", 1),
		"its header": strings.Replace(first, `headers: {Authorization: "Bearer ${TOKEN}"}`, `headers: {Authorization: "Bearer ${TOKEN}", X-Forward-To: "x"}`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			reg := load(t, first, "tok")
			pol, err := policy.LoadPolicy([]byte(`
rules:
  - name: refunds-two-people
    tool: refund_order
    decision: needs_approval
    approvals: 2
`), "two.yaml", reg)
			if err != nil {
				t.Fatal(err)
			}
			store := storetest.Open(t)
			g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol})
			t.Cleanup(g.Close)
			ctx := context.Background()
			runID := models.NewID("run")
			_ = store.Write(ctx, func(tx *storage.Tx) error {
				return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_9", CustomerName: "Nine", Channel: "test", Status: models.RunActive})
			})
			out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_9", Tool: "refund_order", Args: []byte(`{"order_id":"O1","amount":900}`)})
			if err != nil || out.Status != models.CallPending {
				t.Fatalf("%+v %v", out, err)
			}
			if _, err := g.Approve(ctx, out.CallID, approver1, gate.ApproveRequest{}); err != nil {
				t.Fatal(err)
			}
			now := load(t, changed, "tok")
			if hash(now) == hash(reg) {
				t.Fatalf("changing %s left the tool's digest as it was", name)
			}
			g.Reload(now, pol)
			res, err := g.Approve(ctx, out.CallID, supervisor, gate.ApproveRequest{})
			call, _ := store.ToolCall(ctx, out.CallID)
			if (err == nil && res.Outcome != nil && res.Outcome.Status == models.CallSucceeded) || call.Status == models.CallSucceeded {
				t.Fatalf("the call ran after %s changed between its approvals: %+v %v", name, res, err)
			}
			if call.Status != models.CallInvalidated || !strings.Contains(call.Error, "definition changed") {
				t.Fatalf("the call: %s %q (%v)", call.Status, call.Error, err)
			}
			shop.mu.Lock()
			elsewhere.mu.Lock()
			defer shop.mu.Unlock()
			defer elsewhere.mu.Unlock()
			if len(shop.bodies)+len(elsewhere.bodies) != 0 {
				t.Fatalf("a backend was sent the call: %v %v", shop.bodies, elsewhere.bodies)
			}
		})
	}
}
