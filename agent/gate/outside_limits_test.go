package gate_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage/storetest"
)

// An outside agent naming a new customer and session for each call does not
// get past the waiting limits: it has a limit of its own, which holds for
// calls made at the same moment, and says it is a limit.
func TestAnAgentCannotFloodTheQueueWithNewCustomers(t *testing.T) {
	var runs atomic.Int64
	store := storetest.Open(t)
	g := gateOver(t, store, transferTool(t, transferV1, &runs))
	g.Limits = gate.Limits{MaxPendingPerAgent: 5}
	ctx := context.Background()
	bot, other := &models.Agent{ID: "agt_bot", Name: "bot"}, &models.Agent{ID: "agt_other", Name: "other"}
	ask := func(ag *models.Agent, i int) gate.Outcome {
		customer := fmt.Sprintf("cus_%s_%d", ag.Name, i)
		run, err := store.AgentRun(ctx, ag, "s-"+customer, customer)
		if err != nil {
			t.Error(err)
			return gate.Outcome{}
		}
		out, err := g.Call(ctx, gate.CallRequest{RunID: run.ID, CustomerID: customer, Tool: "transfer", Args: []byte(`{"to":"x"}`),
			Actor: "agent:" + ag.Name, AgentID: ag.ID})
		if err != nil {
			t.Error(err)
		}
		return out
	}
	var mu sync.Mutex
	verdicts := map[models.CallStatus]int{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := ask(bot, i)
			mu.Lock()
			verdicts[out.Status]++
			mu.Unlock()
			if out.Status == models.CallDenied && (out.Decision.Rule != "limit:pending_per_agent" || !strings.Contains(out.Error, "limit reached, not a policy decision")) {
				t.Errorf("denied as %+v", out)
			}
		}()
	}
	wg.Wait()
	if verdicts[models.CallPending] != 5 || verdicts[models.CallDenied] != 7 {
		t.Fatalf("12 calls at once of one agent: %v, want 5 pending and 7 refused", verdicts)
	}
	if out := ask(other, 1); out.Status != models.CallPending {
		t.Fatalf("another agent: %+v", out)
	}
}

// An agent's session has a waiting limit of its own (10 by default, room
// for a coding agent writing several files), said in words for an agent.
func TestAnAgentSessionsLimitIsWordedForAnAgent(t *testing.T) {
	var runs atomic.Int64
	store := storetest.Open(t)
	g := gateOver(t, store, transferTool(t, `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`, &runs))
	ctx := context.Background()
	run, err := store.AgentRun(ctx, &models.Agent{ID: "agt_code", Name: "code"}, "mcp:one", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 11 {
		out, err := g.Call(ctx, gate.CallRequest{RunID: run.ID, Tool: "transfer", Args: []byte(fmt.Sprintf(`{"to":"f%d"}`, i)),
			Actor: "agent:code", AgentID: "agt_code"})
		if err != nil {
			t.Fatal(err)
		}
		if i < 10 && out.Status != models.CallPending {
			t.Fatalf("write %d of one session: %+v", i+1, out)
		}
		if i == 10 && (out.Status != models.CallDenied || out.Decision.Rule != "limit:pending_per_session" ||
			!strings.Contains(out.Error, "not a policy decision") || strings.Contains(out.Error, "customer")) {
			t.Fatalf("the 11th: %+v", out)
		}
	}
}
