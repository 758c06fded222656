package web_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agent/receipts"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web"
)

// MCP clients calling at once share the writer's commits, and their
// receipts are then signed side by side (storage.Tx.BeforeCommit): each
// answer still carries the receipt kept with its outcome, and every receipt
// says what the records say.
func TestMCPAnswersAtOnceCarryTheReceiptsKeptWithTheirOutcomes(t *testing.T) {
	a, _ := gateAPIAppWith(t, func(c *web.Config) { c.AgentCallsPerSecond, c.AgentCallBurst = 10_000, 10_000 })
	ctx := context.Background()
	key, _, _ := a.accounts.AddAgent(ctx, "bot", models.Actor{ID: "test"})
	const clients, each = 8, 6
	before := a.store.WriterStats()
	receiptOf := make([][]string, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		cs, err := mcpClient(t, a.srv.URL, key)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		receiptOf[c] = make([]string, each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				order := fmt.Sprintf("B%d-%d", c, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup_order", Arguments: map[string]any{"order_id": order}})
				if err != nil || res.IsError {
					errs <- fmt.Errorf("lookup_order %s: %v %v", order, res, err)
					return
				}
				receiptOf[c][i], _ = res.Meta["countersign/receipt"].(string)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := a.store.WriterStats()
	if after.Units-before.Units <= after.Commits-before.Commits {
		t.Fatalf("%d units in %d commits: no batch was shared", after.Units-before.Units, after.Commits-before.Commits)
	}
	keys := publicKeys(t, a)
	seen := map[string]bool{}
	for c := range clients {
		for i, jws := range receiptOf[c] {
			p, _, err := receipts.Verify(jws, keys)
			if err != nil || p.Status != models.CallSucceeded || seen[p.Call] {
				t.Fatalf("client %d, call %d: the receipt %+v (%v), already seen: %v", c, i, p, err, seen[p.Call])
			}
			seen[p.Call] = true
			kept, err := a.store.Receipt(ctx, p.Call)
			if err != nil || kept.JWS != jws {
				t.Fatalf("call %s: the answer's receipt is not the one kept (%v)", p.Call, err)
			}
			call, err := a.store.ToolCallWithoutResult(ctx, p.Call)
			if err != nil || call.FinishedAt == nil || !kept.CreatedAt.Equal(*call.FinishedAt) {
				t.Fatalf("call %s: the receipt was kept at %v, not with the outcome (%v)", p.Call, kept.CreatedAt, err)
			}
		}
	}
	if rep, err := receipts.VerifyStored(ctx, a.store); err != nil || rep.Receipts < clients*each || len(rep.Failures) != 0 {
		t.Fatalf("the receipts against the records: %+v %v", rep, err)
	}
}
