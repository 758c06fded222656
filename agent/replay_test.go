package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/policy"
	"github.com/countersign/countersign/tools/shop"
)

// Replaying the policy in force changes nothing; replaying a stricter one
// says which decisions would change, from what to what, with the calls.
func TestReplayAPolicyOverRecordedCalls(t *testing.T) {
	e := newEnv(t)
	run := e.newRun("cus_alice", "Alice")
	read := e.call(run, "cus_alice", "get_order_status", `{"order_id":"A1002"}`)
	small := e.call(run, "cus_alice", "issue_refund", `{"order_id":"A1001","amount":20}`)
	big := e.call(e.newRun("cus_bob", "Bob"), "cus_bob", "issue_refund", `{"order_id":"B2001","amount":1200}`)
	if read.Decision.Verdict != policy.Allow || small.Decision.Verdict != policy.Allow || big.Decision.Verdict != policy.NeedsApproval {
		t.Fatalf("recorded: %v %v %v", read.Decision.Verdict, small.Decision.Verdict, big.Decision.Verdict)
	}
	ctx := context.Background()
	since := e.clock.Now().Add(-time.Hour)
	same, err := policy.LoadPolicy(shop.PolicyYAML, "in force", e.gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agent.ReplayPolicy(ctx, e.store, e.gate.Tools(), same, since)
	if err != nil || rep.Calls != 3 || rep.Unchanged != 3 || len(rep.Changes) != 0 {
		t.Fatalf("the policy in force, replayed: %+v %v", rep, err)
	}
	strict, err := policy.LoadPolicy([]byte(`rules:
  - name: no-refunds
    tool: issue_refund
    decision: deny
    reason: refunds are paused
`), "candidate", e.gate.Tools())
	if err != nil {
		t.Fatal(err)
	}
	rep, err = agent.ReplayPolicy(ctx, e.store, e.gate.Tools(), strict, since)
	if err != nil || rep.Calls != 3 || rep.Unchanged != 1 || len(rep.Changes) != 2 {
		t.Fatalf("a stricter policy: %+v %v", rep, err)
	}
	want := map[string]string{"allow -> deny": small.CallID, "needs_approval (2, supervisor) -> deny": big.CallID}
	for _, ch := range rep.Changes {
		if id, ok := want[ch.From+" -> "+ch.To]; !ok || ch.Count != 1 || ch.Examples[0] != id {
			t.Fatalf("change %+v, want one of %v", ch, want)
		}
	}
	// Only calls since the time asked for.
	if rep, _ := agent.ReplayPolicy(ctx, e.store, e.gate.Tools(), strict, e.clock.Now().Add(time.Hour)); rep.Calls != 0 {
		t.Fatalf("calls from before --since were replayed: %+v", rep)
	}
}
