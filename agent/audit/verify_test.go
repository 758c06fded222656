package audit_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/agent/audit"
	"github.com/countersign/countersign/agent/gate"
	"github.com/countersign/countersign/agent/outbox"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
	"github.com/countersign/countersign/tools"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const testPolicy = `
defaults:
  read: {decision: allow, reason: reads are allowed}
  low_write: {decision: allow, reason: low writes are allowed}
  high_write: {decision: needs_approval, reason: a person decides, expires: 1h}
rules:
  - name: never-delete
    tool: delete_all
    decision: deny
    reason: nobody deletes everything
  - name: big-payment
    tool: pay
    when: args.amount > 1000
    decision: needs_approval
    reason: two people
    approvals: 2
    expires: 1h
`

func verifyTools(t *testing.T) *tools.Registry {
	t.Helper()
	spec := func(s tools.Spec) *tools.Tool {
		if s.Schema == nil {
			s.Schema = []byte(`{"type":"object","properties":{},"additionalProperties":false}`)
		}
		tool, err := tools.FromSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		return tool
	}
	ok := func(context.Context, tools.Call, map[string]any) (any, error) { return map[string]any{"ok": true}, nil }
	reg, err := tools.NewRegistry(
		spec(tools.Spec{Name: "lookup", Risk: tools.RiskRead, Run: ok}),
		spec(tools.Spec{Name: "pay", Risk: tools.RiskHighWrite, Amount: "amount",
			Schema: []byte(`{"type":"object","properties":{"to":{"type":"string"},"amount":{"type":"number"}},"required":["to","amount"],"additionalProperties":false}`),
			Run: func(_ context.Context, _ tools.Call, args map[string]any) (any, error) {
				if args["to"] == "closed" {
					return nil, tools.Refuse("the account is closed")
				}
				return map[string]any{"paid": args["amount"]}, nil
			}}),
		spec(tools.Spec{Name: "delete_all", Risk: tools.RiskHighWrite, Run: ok}),
		spec(tools.Spec{Name: "flaky", Risk: tools.RiskLowWrite, Run: func(context.Context, tools.Call, map[string]any) (any, error) {
			return nil, &tools.UnknownError{Message: "the backend did not confirm it"}
		}}),
		spec(tools.Spec{Name: "note", Risk: tools.RiskLowWrite}), // decision-only
	)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// A database the product wrote through every path that records an event
// about a call verifies clean; then, tampered with in three places, the
// check names all three, not just the first.
func TestVerifyPassesOnEveryKindTheProductWritesAndNamesEveryProblem(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.DSN(t)
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store.Now = clk.Now
	reg := verifyTools(t)
	pol, err := policy.LoadPolicy([]byte(testPolicy), "policy.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(gate.Config{Store: store, Tools: reg, Policy: pol, ExecutionWait: 10 * time.Second})
	t.Cleanup(g.Close)
	bot := &models.Agent{ID: "agt_1", Name: "bot"}
	runID := models.NewID("run")
	if err := store.Write(ctx, func(tx *storage.Tx) error {
		return tx.CreateRun(&models.Run{ID: runID, CustomerID: "cus_1", AgentID: bot.ID, Channel: "agent:bot", Status: models.RunActive})
	}); err != nil {
		t.Fatal(err)
	}
	ann := models.Actor{ID: "stf_ann", Name: "Ann", Role: models.Approver}
	ben := models.Actor{ID: "stf_ben", Name: "Ben", Role: models.Approver}
	sue := models.Actor{ID: "stf_sue", Name: "Sue", Role: models.Supervisor}
	call := func(tool, args string) string {
		t.Helper()
		out, err := g.Call(ctx, gate.CallRequest{RunID: runID, CustomerID: "cus_1", Tool: tool, Args: []byte(args), Actor: "agent:bot"})
		if err != nil {
			t.Fatalf("%s %s: %v", tool, args, err)
		}
		return out.CallID
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	approve := func(id string, who models.Actor, args string) {
		t.Helper()
		req := gate.ApproveRequest{}
		if args != "" {
			req.Args = []byte(args)
		}
		_, err := g.Approve(ctx, id, who, req)
		must(err)
	}

	call("lookup", `{}`)
	call("pay", `{"to":7}`)
	call("delete_all", `{}`)
	approve(call("pay", `{"to":"acct_1","amount":5}`), ann, "")
	approve(call("pay", `{"to":"acct_1","amount":5}`), ann, `{"to":"acct_1","amount":6}`)
	two := call("pay", `{"to":"acct_1","amount":2000}`)
	approve(two, ann, "")
	approve(two, ben, "")
	must(g.Reject(ctx, call("pay", `{"to":"acct_2","amount":5}`), ann, "not this account"))
	must(g.Cancel(ctx, call("pay", `{"to":"acct_3","amount":5}`), sue, "the customer withdrew it"))
	approve(call("pay", `{"to":"closed","amount":5}`), ann, "")
	must(g.Reconcile(ctx, call("flaky", `{}`), sue, true, "the backend shows it"))
	if _, err := g.Report(ctx, call("note", `{}`), bot, true, json.RawMessage(`{"noted":true}`), ""); err != nil {
		t.Fatal(err)
	}
	// Left waiting: marked overdue and reminded, its requirements raised by a
	// stricter policy, then expired.
	call("pay", `{"to":"acct_4","amount":5}`)
	box, err := outbox.New(store, outbox.Config{EscalateAfter: 15 * time.Minute, RemindBefore: 50 * time.Minute})
	must(err)
	clk.Advance(20 * time.Minute)
	if overdue, reminded, err := box.Escalate(ctx); err != nil || overdue != 1 || reminded != 1 {
		t.Fatalf("escalate: %d overdue, %d reminded, %v", overdue, reminded, err)
	}
	stricter, err := policy.LoadPolicy([]byte(strings.Replace(testPolicy, "args.amount > 1000", "args.amount > 1", 1)), "policy.yaml", reg)
	must(err)
	g.Reload(reg, stricter)
	if re, err := g.RedecidePending(ctx); err != nil || re.Stricter != 1 {
		t.Fatalf("redecide: %+v %v", re, err)
	}
	clk.Advance(2 * time.Hour)
	if n, err := g.ExpireOverdueActions(ctx); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
	// Approved by one person and caught before it ran (as a crash leaves
	// it), while the policy in force asks two: invalidated, never run.
	inv := call("pay", `{"to":"acct_5","amount":5}`)
	must(store.Write(ctx, func(tx *storage.Tx) error {
		c, err := tx.ToolCall(inv)
		if err != nil {
			return err
		}
		if err := tx.CreateApproval(&models.Approval{ToolCallID: inv, StaffID: ann.ID, StaffName: ann.Name, StaffRole: ann.Role, Verdict: "approve",
			Args: c.Args, ArgsHash: c.ArgsHash}); err != nil {
			return err
		}
		if err := tx.ChangeCallStatus(models.CallChange{ID: inv, From: []models.CallStatus{models.CallPending}, To: models.CallApproved}); err != nil {
			return err
		}
		return tx.Audit(models.Event{Actor: ann.String(), Kind: models.EventActionApproved, Subject: inv,
			Payload: models.ActionApprovalPayload{ArgsHash: c.ArgsHash, Approvals: 1, Required: 1}})
	}))
	if out, err := g.ExecuteApproved(ctx, inv); err != nil || out.Status != models.CallInvalidated {
		t.Fatalf("an approval the policy no longer accepts: %+v %v", out, err)
	}

	seen := map[models.EventKind]bool{}
	must(store.EachAuditEvent(ctx, func(e *models.AuditEvent) error {
		if strings.HasPrefix(e.Subject, "call_") {
			seen[e.Kind] = true
		}
		return nil
	}))
	for _, k := range audit.CallEventKinds {
		if !seen[k] {
			t.Errorf("the database has no %s event: the test does not cover every kind", k)
		}
	}
	for k := range seen {
		if !slices.Contains(audit.CallEventKinds, k) {
			t.Errorf("the product wrote %s about a call, which audit.CallEventKinds does not list", k)
		}
	}
	chain, err := store.VerifyAuditChain(ctx)
	if err != nil || !chain.OK {
		t.Fatalf("chain: %+v %v", chain, err)
	}
	recs, err := audit.VerifyRecords(ctx, store)
	if err != nil || !recs.OK || recs.Calls != 13 {
		t.Fatalf("records of an untouched database: %+v %v", recs, err)
	}

	// Tampered: two rows changed behind the gate's back and one event.
	var ids []string
	for _, c := range []string{"rejected", "cancelled"} {
		calls, err := store.AuditCalls(ctx, models.AuditQuery{Status: models.CallStatus(c), Limit: 10})
		if err != nil || len(calls) != 1 {
			t.Fatalf("%s calls: %d %v", c, len(calls), err)
		}
		ids = append(ids, calls[0].ID)
	}
	slices.Sort(ids)
	storetest.Tamper(t, dsn, `UPDATE tool_calls SET status = 'succeeded' WHERE id IN ('`+ids[0]+`', '`+ids[1]+`')`,
		`UPDATE audit_events SET payload = '{"tampered":true}' WHERE seq = 3`)
	chain, err = store.VerifyAuditChain(ctx)
	if err != nil || chain.OK || chain.BadSeq != 3 || len(chain.Breaks) != 1 {
		t.Fatalf("chain after tampering: %+v %v", chain, err)
	}
	recs, err = audit.VerifyRecords(ctx, store)
	if err != nil || recs.OK || len(recs.Disagreements) != 2 || len(ids) != 2 {
		t.Fatalf("records after tampering with %v: %+v %v", ids, recs, err)
	}
	for i, id := range ids {
		if !strings.Contains(recs.Disagreements[i], id) || !strings.Contains(recs.Disagreements[i], "the row says succeeded") {
			t.Errorf("disagreement %d: %q", i, recs.Disagreements[i])
		}
	}
}
