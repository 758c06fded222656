package web_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/web"
)

// One action per intent: the same write asked again from another MCP
// session (a client that gave up and reconnected, a new process) joins the
// waiting action instead of making a second; an outcome nobody was handed
// goes to the next identical request; after that, the same request is a
// new call. The backend is paid once per action.
func TestTheSameWriteFromAnotherSessionJoinsTheAction(t *testing.T) {
	a, refunds := gateAPIAppWith(t, func(cfg *web.Config) { cfg.MCPWait = 300 * time.Millisecond })
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "desk", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	tok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	askWith := func(meta mcp.Meta) (*mcp.CallToolResult, error) {
		cs, err := mcpClient(t, a.srv.URL, key)
		if err != nil {
			return nil, err
		}
		defer cs.Close()
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A1", "amount": 900}, Meta: meta})
	}
	ask := func() (string, error) {
		res, err := askWith(nil)
		if err != nil {
			return "", err
		}
		return textOf(res), nil
	}
	waiting := func() []string {
		t.Helper()
		rows, err := a.store.PendingActions(ctx, models.ActionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids
	}
	first, err := ask()
	if err != nil || !strings.Contains(first, "Waiting for a person") {
		t.Fatalf("first: %q %v", first, err)
	}
	ids := waiting()
	if len(ids) != 1 || !strings.Contains(first, ids[0]) {
		t.Fatalf("after the first ask: %v", ids)
	}
	// Seven clients at once, each its own session: still the one action.
	var wg sync.WaitGroup
	answers := make(chan string, 7)
	for range 7 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text, err := ask()
			if err != nil {
				t.Error(err)
			}
			answers <- text
		}()
	}
	wg.Wait()
	close(answers)
	for text := range answers {
		if !strings.Contains(text, ids[0]) {
			t.Errorf("a client asking again was answered %q, not with the waiting call %s", text, ids[0])
		}
	}
	if now := waiting(); len(now) != 1 {
		t.Fatalf("%d actions wait after eight asks of one write: %v", len(now), now)
	}
	if r := a.do("POST", "/api/v1/actions/"+ids[0]+"/approve", tok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	// Nobody was handed the outcome yet: the next identical ask gets it.
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for {
		if got, err = ask(); err == nil && strings.Contains(got, "rf_1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outcome never reached the next ask: %q %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if refunds.Load() != 1 || len(waiting()) != 0 {
		t.Fatalf("after the outcome: %d refunds, %v waiting", refunds.Load(), waiting())
	}
	// Handed over or not, the same write asked again is that outcome,
	// marked as a replay, within the intent window.
	replay, err := askWith(nil)
	if err != nil || !strings.Contains(textOf(replay), "rf_1") || len(waiting()) != 0 {
		t.Fatalf("the same write asked after its outcome was handed over: %v %v %v", replay, err, waiting())
	}
	if r, _ := replay.Meta["countersign/replay"].(map[string]any); r["call"] != ids[0] || r["status"] != "succeeded" {
		t.Fatalf("the replay is not marked as one: %v", replay.Meta)
	}
	// An agent that means a second identical refund says so.
	again, err := askWith(mcp.Meta{"countersign/new-intent": true})
	if ids2 := waiting(); err != nil || len(ids2) != 1 || ids2[0] == ids[0] || !strings.Contains(textOf(again), ids2[0]) {
		t.Fatalf("a new intent after the outcome: %v %v %v", again, ids2, err)
	}
	if refunds.Load() != 1 {
		t.Fatalf("%d refunds, want 1", refunds.Load())
	}
}

// Two instances on one PostgreSQL database: the same write asked through
// each at the same moment is one action.
func TestTheSameWriteOnTwoInstancesIsOneAction(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	storeA, storeB := twoInstances(t)
	instance := func(store *storage.Store) *app {
		reg, _ := gateAPITools(t)
		pol, err := policy.LoadPolicy(policy.DefaultPolicyYAML, "default", reg)
		if err != nil {
			t.Fatal(err)
		}
		return startApp(t, appConfig{Store: store, Tools: reg, Policy: pol, Log: discardLog(),
			Web: web.Config{MCPWait: 200 * time.Millisecond}}, false)
	}
	a, b := instance(storeA), instance(storeB)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "desk", models.Actor{ID: "test"})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst := a
			if i%2 == 1 {
				inst = b
			}
			cs, err := mcpClient(t, inst.srv.URL, key)
			if err != nil {
				t.Error(err)
				return
			}
			defer cs.Close()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A1", "amount": 900}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	n, err := storeA.CountPendingActions(ctx, models.ActionFilter{})
	if err != nil || n != 1 {
		t.Fatalf("%d actions wait after the same write was asked 8 times on two instances (%v)", n, err)
	}
}

// A client of the stateless 2026-07-28 revision that gave up while its
// call was held (its own deadline): a person approves, and the same call
// asked by a new client is that outcome, marked as a replay with its
// receipt; one action, one refund.
func TestAStatelessClientThatGaveUpGetsTheOutcome(t *testing.T) {
	set, refunds := gateAPITools(t)
	a := mcpApp(t, set, nil, 30*time.Second)
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "modern", models.Actor{ID: "test"})
	a.accounts.AddStaff(ctx, "ann@x.test", "Ann", models.Approver, password, models.Actor{ID: "test"})
	staffTok, _ := a.accounts.CreateAPIToken(ctx, "ann@x.test", models.Actor{})
	refund := &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A9", "amount": 300}}

	cs, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	if _, err := cs.CallTool(short, refund); err == nil {
		t.Fatal("the call was not held")
	}
	cancel()
	cs.Close()
	pending, err := a.store.PendingActions(ctx, models.ActionFilter{})
	if err != nil || len(pending) != 1 {
		t.Fatalf("%d actions wait: %v", len(pending), err)
	}
	if r := a.do("POST", "/api/v1/actions/"+pending[0].ID+"/approve", staffTok, `{}`); r.Status != 200 {
		t.Fatalf("approve: %d %s", r.Status, r.Raw)
	}
	time.Sleep(200 * time.Millisecond) // nobody's request is open for it
	late, err := mcpClient(t, a.srv.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	res, err := late.CallTool(ctx, refund)
	if err != nil || res.IsError || !strings.Contains(textOf(res), "rf_1") {
		t.Fatalf("the late asker: %v %v", res, err)
	}
	if r, _ := res.Meta["countersign/replay"].(map[string]any); r["call"] != pending[0].ID {
		t.Fatalf("not marked as a replay: %v", res.Meta)
	}
	if jws, _ := res.Meta["countersign/receipt"].(string); strings.Count(jws, ".") != 2 {
		t.Fatalf("no receipt: %v", res.Meta)
	}
	if n := refunds.Load(); n != 1 {
		t.Fatalf("%d refunds", n)
	}
	if now, _ := a.store.PendingActions(ctx, models.ActionFilter{}); len(now) != 0 {
		t.Fatalf("asking again made a second action: %v", now)
	}
}
