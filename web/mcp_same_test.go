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
	ask := func() (string, error) {
		cs, err := mcpClient(t, a.srv.URL, key)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund_order", Arguments: map[string]any{"order_id": "A1", "amount": 900}})
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
	// Handed over: the same write asked now is a new call.
	again, err := ask()
	if ids2 := waiting(); err != nil || len(ids2) != 1 || ids2[0] == ids[0] || !strings.Contains(again, ids2[0]) {
		t.Fatalf("a new ask after the outcome was handed over: %q %v %v", again, ids2, err)
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
